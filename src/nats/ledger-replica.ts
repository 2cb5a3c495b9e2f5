import type { NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { CommittedBatch, LedgerLog, Subscription } from '../bus/ledger-log.js';
import type { Database } from 'lmdb';
import { ensureError, VigilError } from '../errors.js';
import type { Logger } from '../log.js';
import type { LmdbLedger } from '../store/lmdb-ledger.js';
import type { LmdbLedgerLog } from '../store/lmdb-ledger-log.js';
import { LEDGER_STREAM, ledgerSubject, type LedgerStreamNames } from './ledger-stream.js';
import type { JetStreamPosition } from './jetstream-ledger-log.js';

export interface LedgerReplicaOptions {
  /** Where the replica keeps its watermark (a table of this node's LMDB). */
  meta: Database<number, string>;
  names?: LedgerStreamNames;
  /** How long a keyed read waits for the replica before 503. Default 5000 ms. */
  waitMs?: number;
  log: Logger;
}

const WATERMARK = 'watermark';

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
  private failed: Error | null = null;

  private constructor(
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
  static async start(nc: NatsConnection, stream: LedgerLog, local: LmdbLedgerLog, ledger: LmdbLedger, options: LedgerReplicaOptions): Promise<LedgerReplica> {
    const replica = new LedgerReplica(local, ledger, await jetstreamManager(nc), options);
    const names = options.names ?? LEDGER_STREAM;
    const before = (await replica.jsm.streams.info(names.stream)).state.last_seq;
    const held = new Map<string, number>();
    for (const org of ledger.orgs()) held.set(org, ledger.last(org)?.seq ?? 0);
    const from: JetStreamPosition = { adapter: 'jetstream', startSeq: replica.watermark + 1, held };
    replica.subscription = await stream.subscribe(replica.onBatch, from);
    await replica.tail;
    if (replica.failed !== null) {
      replica.subscription.unsubscribe();
      throw replica.failed;
    }
    // The replay skips batches held whole: everything up to the stream's end at the start is here.
    replica.watermark = Math.max(replica.watermark, before);
    return replica;
  }

  private readonly onBatch = (batch: CommittedBatch): void => {
    const { org, rows, fence } = batch;
    const last = this.localLast.get(org) ?? this.ledger.last(org)?.seq ?? 0;
    const newer = rows.filter((row) => row.seq > last);
    const appended = newer.length === 0 || this.failed !== null ? null : this.local.append(org, newer, last);
    if (appended !== null) this.localLast.set(org, newer[newer.length - 1]!.seq);
    this.tail = this.tail.then(async () => {
      if (this.failed !== null) return;
      try {
        const outcome = await appended;
        if (outcome?.ok === false) throw new Error(`the local replica of org ${org} does not continue at seq ${newer[0]!.seq}`);
        this.landed(org, fence);
      } catch (error) {
        this.failed = ensureError(error);
        this.options.log.error({ org, err: this.failed }, 'ledger replica stopped: a batch could not be applied');
      }
    });
  };

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
    const watermark = this.watermark;
    await this.options.meta.put(WATERMARK, watermark);
  }

  /**
   * Resolves once the local ledger holds the org's last batch as of now (bounded: else 503
   * `unavailable`), so a keyed read on any node sees every write acknowledged before it.
   */
  async caughtUp(org: string): Promise<void> {
    if (this.failed !== null) throw behind('this node\'s copy of the ledger stopped; try another node');
    let last: number;
    try {
      last = await this.lastStreamSeq(org);
    } catch (error) {
      throw behind('the ledger stream did not answer', error);
    }
    if (last === 0) return;
    if ((this.applied.get(org) ?? 0) >= last || this.watermark >= last) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(behind('this node\'s copy of the ledger trails the stream; try again')), this.options.waitMs ?? 5000);
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
    this.subscription?.unsubscribe();
    await this.tail;
  }
}

function behind(message: string, cause?: unknown): VigilError {
  return new VigilError('unavailable', message, undefined, { retryAfterSeconds: 1, ...(cause === undefined ? {} : { cause }) });
}
