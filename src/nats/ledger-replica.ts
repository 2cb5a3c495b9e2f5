import type { NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { CommittedBatch, Subscription } from '../bus/ledger-log.js';
import type { Database } from 'lmdb';
import { ensureError, VigilError } from '../errors.js';
import type { Logger } from '../log.js';
import { within } from '../time-bound.js';
import type { LmdbLedger } from '../store/lmdb-ledger.js';
import type { LmdbLedgerLog } from '../store/lmdb-ledger-log.js';
import { LEDGER_STREAM, ledgerSubject, type LedgerStreamNames } from './ledger-stream.js';
import type { JetStreamLedgerLog, JetStreamPosition } from './jetstream-ledger-log.js';

export interface LedgerReplicaOptions {
  /** Where the replica keeps its watermark (a table of this node's LMDB). */
  meta: Database<number, string>;
  names?: LedgerStreamNames;
  /** How long a keyed read waits for the replica before 503. Default 5000 ms. */
  waitMs?: number;
  log: Logger;
}

const WATERMARK = 'watermark';
/** How long a failed re-read of an org waits before the next. */
const REPAIR_RETRY_MS = 1000;

/**
 * This node's copy of the ledger in cluster mode (DESIGN §8): every batch of the `VIGIL_LEDGER`
 * stream is appended, in stream order, to the node's LMDB ledger through its LmdbLedgerLog, whose
 * local subscribers (the projections) then see it as in embedded mode. The replica can be deleted:
 * it is rebuilt from the stream on the next start.
 *
 * The watermark is the stream sequence below which every batch is in the local ledger; it is
 * saved with the checkpoints, and a start resumes from it rather than from the stream's start.
 * `caughtUp(org)` is the read-your-writes step of keyed reads: it waits until the local ledger
 * holds the org's last batch as of the call.
 */
export class LedgerReplica {
  /** Per org, the stream sequence of its last batch in the local ledger. */
  private readonly applied = new Map<string, number>();
  /** Per org, the local seq the next local append continues from (appends are pipelined). */
  private readonly localLast = new Map<string, number>();
  /** The stream sequence up to which every batch is in the local ledger. */
  private watermark: number;
  private readonly waiters = new Map<string, { seq: number; resolve: () => void }[]>();
  private subscription: Subscription | null = null;
  /** The bookkeeping of the last local append: batches land in stream order. */
  private tail: Promise<unknown> = Promise.resolve();
  /** Orgs whose rows are being read again from the stream, with their batches that came meanwhile. */
  private readonly repairing = new Map<string, CommittedBatch[]>();
  private closed = false;

  private constructor(
    private readonly stream: JetStreamLedgerLog,
    private readonly local: LmdbLedgerLog,
    private readonly ledger: LmdbLedger,
    private readonly jsm: JetStreamManager,
    private readonly options: LedgerReplicaOptions,
  ) {
    this.watermark = options.meta.get(WATERMARK) ?? 0;
  }

  /**
   * Catches the local ledger up with the stream, then follows it live. Resolves once every batch
   * committed before the call is in the local ledger.
   */
  static async start(nc: NatsConnection, stream: JetStreamLedgerLog, local: LmdbLedgerLog, ledger: LmdbLedger, options: LedgerReplicaOptions): Promise<LedgerReplica> {
    const replica = new LedgerReplica(stream, local, ledger, await jetstreamManager(nc), options);
    const names = options.names ?? LEDGER_STREAM;
    const before = (await replica.jsm.streams.info(names.stream)).state.last_seq;
    const held = new Map<string, number>();
    for (const org of ledger.orgs()) held.set(org, ledger.last(org)?.seq ?? 0);
    const from: JetStreamPosition = { adapter: 'jetstream', startSeq: replica.watermark + 1, held };
    replica.subscription = await stream.subscribe(replica.onBatch, from);
    await replica.tail;
    // The replay skips batches held whole: everything up to the stream's end at the start is here.
    replica.watermark = Math.max(replica.watermark, before);
    return replica;
  }

  private readonly onBatch = (batch: CommittedBatch): void => {
    const { org, rows, fence } = batch;
    const held = this.repairing.get(org);
    if (held !== undefined) {
      held.push(batch);
      return;
    }
    const last = this.localLast.get(org) ?? this.ledger.last(org)?.seq ?? 0;
    const newer = rows.filter((row) => row.seq > last);
    if (newer.length > 0 && newer[0]!.seq !== last + 1) {
      this.repair(org, batch, `rows ${last + 1}..${newer[0]!.seq - 1} never came (stream sequence ${fence} holds ${newer[0]!.seq}..)`);
      return;
    }
    const appended = newer.length === 0 ? null : this.local.append(org, newer, last);
    if (appended !== null) this.localLast.set(org, newer[newer.length - 1]!.seq);
    this.tail = this.tail.then(async () => {
      try {
        const outcome = await appended;
        if (outcome?.ok === false) throw new Error(`the local replica of org ${org} does not continue at seq ${newer[0]!.seq}`);
        if (!this.repairing.has(org)) this.landed(org, fence);
      } catch (error) {
        this.repair(org, null, ensureError(error).message);
      }
    });
  };

  /**
   * The org's batches cannot be applied as they come (a gap in what the feed handed over: seen
   * with nats-server 2.9.10 when a consumer's server was cut off from its cluster and healed, or
   * a local write that failed): its rows are read again from the stream leader, after the last
   * one held here, and its batches that come meanwhile wait. Other orgs go on. Retried every
   * second until it succeeds; until then the org's keyed reads wait (and time out with 503).
   */
  private repair(org: string, batch: CommittedBatch | null, why: string): void {
    const held = this.repairing.get(org);
    if (held !== undefined) {
      if (batch !== null) held.push(batch);
      return;
    }
    this.repairing.set(org, batch === null ? [] : [batch]);
    this.localLast.delete(org);
    this.options.log.warn({ org, why }, 'ledger replica: re-reading the org from the stream');
    void this.reread(org);
  }

  private async reread(org: string): Promise<void> {
    for (let attempt = 0; !this.closed; attempt++) {
      try {
        // Appends of the org launched before the gap was seen settle first.
        await this.tail;
        let last = this.ledger.last(org)?.seq ?? 0;
        let fence = 0;
        // After the org's last batch applied here, or (a second try) from the stream's start.
        for await (const batch of this.stream.readAfter(org, last + 1, attempt === 0 ? (this.applied.get(org) ?? 0) : 0)) {
          const newer = batch.rows.filter((row) => row.seq > last);
          if (newer.length > 0) {
            if (newer[0]!.seq !== last + 1) throw new Error(`the stream holds org ${org}'s rows from ${newer[0]!.seq}, not ${last + 1}`);
            const outcome = await this.local.append(org, newer, last);
            if (!outcome.ok) throw new Error(`the local replica of org ${org} does not continue at seq ${newer[0]!.seq}`);
            last = newer[newer.length - 1]!.seq;
          }
          fence = batch.fence;
        }
        const held = this.repairing.get(org) ?? [];
        this.repairing.delete(org);
        this.options.log.info({ org, seq: last }, 'ledger replica: the org is whole again');
        if (fence > 0) this.landed(org, fence);
        for (const batch of held) this.onBatch(batch);
        return;
      } catch (error) {
        this.options.log.warn({ org, err: ensureError(error) }, 'ledger replica: re-reading the org failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, REPAIR_RETRY_MS));
      }
    }
  }

  private landed(org: string, fence: number): void {
    this.applied.set(org, fence);
    this.watermark = Math.max(this.watermark, fence);
    const waiting = this.waiters.get(org);
    if (waiting === undefined) return;
    const still = waiting.filter((w) => w.seq > fence);
    for (const w of waiting) if (w.seq <= fence) w.resolve();
    if (still.length > 0) this.waiters.set(org, still);
    else this.waiters.delete(org);
  }

  /** Saves the watermark (with the checkpoints): the next start resumes after it. */
  async saveWatermark(): Promise<void> {
    // An org being repaired lacks rows below the watermark: a restart must replay them.
    if (this.repairing.size > 0) return;
    const watermark = this.watermark;
    await this.options.meta.put(WATERMARK, watermark);
  }

  /**
   * Resolves once the local ledger holds the org's last batch as of now (bounded: else 503
   * `unavailable`), so a keyed read on any node sees every write acknowledged before it.
   */
  async caughtUp(org: string): Promise<void> {
    const end = Date.now() + (this.options.waitMs ?? 5000);
    let last: number;
    try {
      last = await within(this.lastStreamSeq(org), end - Date.now(), () => {
        throw behind('the ledger stream did not answer in time');
      });
    } catch (error) {
      throw error instanceof VigilError ? error : behind('the ledger stream did not answer', error);
    }
    if (last === 0) return;
    if (!this.repairing.has(org) && ((this.applied.get(org) ?? 0) >= last || this.watermark >= last)) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(behind('this node\'s copy of the ledger trails the stream; try again')), Math.max(0, end - Date.now()));
      const list = this.waiters.get(org) ?? [];
      list.push({
        seq: last,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
      this.waiters.set(org, list);
    });
  }

  /**
   * The org's rows from `fromSeq` as the local ledger holds them once caught up with the stream,
   * every batch carrying the fence of the org's last batch (the stream sequence the next append
   * presents). A new owner recovers from this: a local scan, not one stream get per batch.
   */
  async *readCaughtUp(org: string, fromSeq: number): AsyncIterable<CommittedBatch> {
    await this.caughtUp(org);
    const fence = this.applied.get(org) ?? (await this.lastStreamSeq(org));
    for await (const batch of this.local.read(org, fromSeq)) yield { ...batch, fence };
  }

  /** The stream sequence of the org's last batch (0: none), as the stream leader has it now. */
  private async lastStreamSeq(org: string): Promise<number> {
    const names = this.options.names ?? LEDGER_STREAM;
    const message = await this.jsm.streams.getMessage(names.stream, { last_by_subj: ledgerSubject(names, org) });
    return message?.seq ?? 0;
  }

  /** How far behind the stream's end the local ledger is, in stream sequences (0: caught up). */
  async lag(): Promise<number> {
    const names = this.options.names ?? LEDGER_STREAM;
    const end = (await this.jsm.streams.info(names.stream)).state.last_seq;
    return Math.max(0, end - this.watermark);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.subscription?.unsubscribe();
    await this.tail;
  }
}

function behind(message: string, cause?: unknown): VigilError {
  return new VigilError('unavailable', message, undefined, { retryAfterSeconds: 1, ...(cause === undefined ? {} : { cause }) });
}
