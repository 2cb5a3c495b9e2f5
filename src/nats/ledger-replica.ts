import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { CommittedBatch } from '../bus/ledger-log.js';
import { GENESIS_HASH, type LedgerRow } from '../domain/ledger.js';
import type { Database } from 'lmdb';
import { ensureError, VigilError } from '../errors.js';
import type { Logger } from '../log.js';
import { RepeatedFailure } from '../repeated-failure.js';
import { within } from '../time-bound.js';
import type { LmdbLedger } from '../store/lmdb-ledger.js';
import type { LmdbLedgerLog } from '../store/lmdb-ledger-log.js';
import { DivergedOrgs } from './diverged-orgs.js';
import type { JetStreamLedgerLog } from './jetstream-ledger-log.js';
import { toBatch } from './ledger-subscription.js';
import { partitionOf } from './partition.js';
import { PartitionFollower } from './partition-follower.js';
import { behind, continuing, lastStreamBatch, lastStreamRows, misfit, streamTail, tailAt, type StreamTail, type Tail } from './replica-rows.js';
import { SeqWaiters } from './seq-waiters.js';

export interface LedgerReplicaOptions {
  /** Where the replica keeps its watermark (a table of this node's LMDB). */
  meta: Database<number, string>;
  /**
   * When a gained partition is read the second time: after the previous owner's last append can
   * have been stored (ClusterNode: its lease, the append timeout and a margin). Default 11 s.
   */
  secondReadMs?: number;
  /** How long a keyed read waits for the replica before 503. Default 5000 ms. */
  waitMs?: number;
  /** The most batches of an org kept while it is re-read (past it they are dropped and read from the stream). Default 1000. */
  holdMax?: number;
  log: Logger;
}

/** How long a failed re-read of an org, or catch-up of a partition, waits before the next. */
const REPAIR_RETRY_MS = 1000;
/** Batches of an org that come while it is re-read that are kept, by default. */
const HOLD_MAX = 1000;
/** How long a keyed read waits for a partition's catch-up to bring the org's last batch before reading it from the stream. */
const PULL_AFTER_MS = 1000;
/** When a gained partition is read the second time, unless told (LedgerReplicaOptions.secondReadMs). */
const SECOND_READ_MS = 11_000;

/**
 * This node's copy of the ledger in cluster mode, of the partitions it owns: batches are appended
 * to the node's LMDB ledger through its LmdbLedgerLog, whose local subscribers (the projections)
 * then see them as in embedded mode. The copy can be deleted: it is read again from the stream.
 *
 * Nothing follows the whole stream. An owner's writers hand their acknowledged batches over
 * (`applyOwn`); a partition gained is read from the stream (`partitions`, PartitionFollower). Any other org is read from the stream when something asks for
 * it: `caughtUp(org)` (keyed reads, a writer's recovery, deliveries, exports) waits until the
 * local ledger holds the org's last batch as of the call, and reads the org's missing batches
 * itself when nothing is bringing them.
 */
export class LedgerReplica {
  /** Per org, the stream sequence of its last batch in the local ledger. */
  private readonly applied = new Map<string, number>();
  /** Per org, the local row the next local append continues from (appends are pipelined). */
  private readonly localLast = new Map<string, Tail>();
  /**
   * Per org appended to since the start, the last seq whose append has resolved, so the local
   * subscribers (the projections) have it: a row is readable in LMDB a moment before, and a keyed
   * read must see it in the projections too. Orgs not appended to since the start: what the
   * ledger holds (the start-up replay fed the projections).
   */
  private readonly handed = new Map<string, number>();
  /** Orgs whose rows here are not the stream's: never read from here again. */
  private readonly divergedAt: DivergedOrgs;
  /** The partitions this node owns, read from the stream when gained. */
  readonly partitions: PartitionFollower;
  /** Whether this node holds a partition's lease now (ClusterNode tells it: `ownedBy`). */
  private owns: (partition: number) => boolean = () => false;
  private readonly waiters = new SeqWaiters();
  /** The bookkeeping of the last local append: batches land in stream order. */
  private tail: Promise<unknown> = Promise.resolve();
  /** Orgs whose rows are being read again from the stream, with their batches that came meanwhile. */
  private readonly repairing = new Map<string, CommittedBatch[]>();
  private closed = false;

  private constructor(
    private readonly stream: JetStreamLedgerLog,
    private readonly local: LmdbLedgerLog,
    private readonly ledger: LmdbLedger,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly options: LedgerReplicaOptions,
  ) {
    this.divergedAt = new DivergedOrgs(options.meta, options.log);
    const heldThrough = (org: string): number => (this.localLast.get(org) ?? this.tailOf(org)).seq;
    this.partitions = new PartitionFollower(
      {
        deliver: (message) => {
          const batch = toBatch(message, heldThrough, options.log);
          if (batch !== null) this.onBatch(batch);
        },
        landed: () => this.tail,
        repairing: (partition) => this.repairingIn(partition),
        owns: (partition) => this.owns(partition),
      },
      { js, jsm, names: stream.names, meta: options.meta, secondReadMs: options.secondReadMs ?? SECOND_READ_MS, log: options.log },
    );
  }

  /** Tells the replica which partitions this node holds the lease of now (own appends move a watermark only then). */
  ownedBy(owns: (partition: number) => boolean): void {
    this.owns = owns;
  }

  /** The replica over this node's LMDB ledger: it follows no partition until told to (`follow`). */
  static async start(nc: NatsConnection, stream: JetStreamLedgerLog, local: LmdbLedgerLog, ledger: LmdbLedger, options: LedgerReplicaOptions): Promise<LedgerReplica> {
    return new LedgerReplica(stream, local, ledger, jetstream(nc), await jetstreamManager(nc), options);
  }

  /**
   * A batch this node's writer appended to the stream (acknowledged, at stream sequence `fence`).
   * Once the org's partition has been read twice since it was gained, and while this node holds
   * its lease, nobody else writes it, so the partition's watermark moves past the batch with it
   * (a partition gained again is read on from there, not from where this node gained it last).
   */
  applyOwn(org: string, rows: readonly LedgerRow[], fence: number): void {
    if (this.closed) return;
    this.onBatch({ org, rows, fence });
    const partition = this.partitionOf(org);
    this.tail = this.tail.then(() => this.partitions.ownAppend(partition, fence));
  }

  private partitionOf(org: string): number {
    return partitionOf(org, this.stream.names.partitions);
  }

  /** Whether an org of the partition is being read again. */
  private repairingIn(partition: number): boolean {
    for (const org of this.repairing.keys()) if (this.partitionOf(org) === partition) return true;
    return false;
  }

  private readonly onBatch = (batch: CommittedBatch): void => {
    const { org, rows, fence } = batch;
    if (this.closed) return;
    if (this.divergedAt.has(org)) return;
    const held = this.repairing.get(org);
    if (held !== undefined) {
      this.hold(org, held, batch);
      return;
    }
    const tail = this.localLast.get(org) ?? this.tailOf(org);
    const newer = rows.filter((row) => row.seq > tail.seq);
    const broken = newer.length === 0 ? null : misfit(tail, newer[0]!);
    if (broken !== null) {
      this.repair(org, batch, `${broken} (stream sequence ${fence})`);
      return;
    }
    if (newer.length > 0 && !this.handed.has(org)) this.handed.set(org, tail.seq);
    const appended = newer.length === 0 ? null : this.local.append(org, newer, tail.seq);
    if (appended !== null) this.localLast.set(org, tailAt(newer[newer.length - 1]!));
    this.tail = this.tail.then(async () => {
      try {
        const outcome = await appended;
        if (outcome?.ok === false) throw new Error(`the local replica of org ${org} does not continue at seq ${newer[0]!.seq}`);
        if (newer.length > 0) this.handed.set(org, newer[newer.length - 1]!.seq);
        if (!this.repairing.has(org)) this.landed(org, fence);
      } catch (error) {
        this.repair(org, null, ensureError(error).message);
      }
    });
  };

  /** The org's last row here (seq 0 and the genesis hash: none). */
  private tailOf(org: string): Tail {
    const last = this.ledger.last(org);
    return last === undefined ? { seq: 0, hash: GENESIS_HASH } : tailAt(last);
  }

  /**
   * The org's batches cannot be applied as they come (a gap in what a partition read handed over: seen
   * with nats-server 2.9.10 when a consumer's server was cut off from its cluster and healed, or
   * a local write that failed): its rows are read again from the stream leader, after the last
   * one held here, and its batches that come meanwhile wait. Other orgs go on. Retried every
   * second until it succeeds; until then the org's keyed reads wait (and time out with 503).
   */
  private repair(org: string, batch: CommittedBatch | null, why: string): void {
    const held = this.repairing.get(org);
    if (held !== undefined) {
      if (batch !== null) this.hold(org, held, batch);
      return;
    }
    this.repairing.set(org, batch === null ? [] : [batch]);
    this.localLast.delete(org);
    // The rows missing may be below the partition's watermark (a read that skipped a message): it
    // no longer claims anything of the org past its last batch held here.
    this.partitions.lower(this.partitionOf(org), this.applied.get(org) ?? 0);
    this.options.log.warn({ org, why }, 'ledger replica: re-reading the org from the stream');
    void this.reread(org);
  }

  /**
   * Keeps a batch that came while its org is re-read. A busy org re-read for long would
   * grow them without bound: past `holdMax` those kept are dropped, as the re-read reads on to
   * the org's last batch in the stream anyway (a batch dropped after that read is a gap the next
   * batch that comes shows, or a keyed read's check: the org is re-read again).
   */
  private hold(org: string, held: CommittedBatch[], batch: CommittedBatch): void {
    if (held.length >= (this.options.holdMax ?? HOLD_MAX)) {
      this.options.log.warn({ org, dropped: held.length }, 'ledger replica: dropped the batches kept while the org is re-read; the re-read reads them from the stream');
      held.length = 0;
    }
    held.push(batch);
  }

  private async reread(org: string): Promise<void> {
    const began = Date.now();
    const failed = new RepeatedFailure();
    // The stream sequence the read goes on after: first the org's last batch applied here (a
    // hint), and once the hint proved past what is missing, the stream's start. A try that fails
    // midway (a request unanswered) leaves what it read here, and the next goes on after it: an
    // org read from the start is thousands of gets, and one failing must not start them over.
    let after = this.applied.get(org) ?? this.partitions.watermarkOf(this.partitionOf(org));
    let fromStart = after === 0;
    // A consumer may sit on a server that has not caught up: what it hands is judged by the leader's gets.
    let byConsumer = true;
    for (let attempt = 0; !this.closed; attempt++) {
      let again = false;
      const reached = after;
      try {
        // Appends of the org launched before the gap was seen settle first.
        await this.tail;
        let tail = this.tailOf(org);
        // From the start: through a consumer, a thousand batches a fetch, not one get per batch.
        const consumer = after === 0 && byConsumer;
        const batches = consumer ? this.stream.readWhole(org, tail.seq + 1) : this.stream.readAfter(org, tail.seq + 1, after);
        let gap: string | null = null;
        for await (const batch of batches) {
          const newer = batch.rows.filter((row) => row.seq > tail.seq);
          if (newer.length > 0) {
            const broken = misfit(tail, newer[0]!);
            if (broken !== null && consumer) {
              again = true;
              byConsumer = false;
              throw new Error(`the stream's consumer: ${broken}; asking the stream leader`);
            }
            if (broken !== null && newer[0]!.seq === tail.seq + 1) return this.diverged(org, tail.seq, broken);
            if (broken !== null) {
              gap = broken;
              break;
            }
            tail = await this.applyRead(org, tail, newer);
          }
          after = batch.fence;
        }
        // The by-subject reads can miss the org's last message while the leader's last-by-subject
        // get has it (nats-server 2.9.10 after a server was cut off from its cluster and healed:
        // every re-read failed the same way, and the org's reads and writes waited for good). So
        // the read ends with that message itself: taken when its rows continue what is held here.
        const last = await this.lastStreamRows(org);
        const end = streamTail(last);
        const rest = last === null || (gap === null && end.seq <= tail.seq) ? null : continuing(tail, last);
        if (rest !== null && rest.length > 0) {
          tail = await this.applyRead(org, tail, rest);
        } else if (gap !== null) {
          // Rows missing after the hint: the batch holding them is at or before it.
          again = !fromStart;
          if (again) after = 0;
          fromStart = true;
          throw new Error(`the stream: ${gap}`);
        } else if (end.seq > tail.seq) {
          // The hint (the org's last batch applied here) was past what is missing: from the start,
          // at once. Or the org's writer appended meanwhile: on at once, as long as each try reads more.
          again = !fromStart || after > reached;
          if (!fromStart) after = 0;
          fromStart = true;
          throw new Error(`the stream holds org ${org}'s rows through ${end.seq}, read through ${tail.seq}`);
        }
        const held = this.repairing.get(org) ?? [];
        this.repairing.delete(org);
        this.options.log.info({ org, seq: tail.seq, failures: failed.clear(), ms: Date.now() - began }, 'ledger replica: the org is whole again');
        // Not the partition's watermark: other orgs' batches up to here are not known to be held.
        if (Math.max(after, end.streamSeq) > 0) this.landed(org, Math.max(after, end.streamSeq));
        for (const batch of held) this.onBatch(batch);
        return;
      } catch (error) {
        // The first, each new reason, then every half minute: a stream that lacks the rows (NATS lost them) fails every time.
        const err = ensureError(error);
        if (failed.note(err.message)) this.options.log.warn({ org, attempt, err }, 'ledger replica: re-reading the org failed; retrying every second');
        if (!again) await new Promise((resolve) => setTimeout(resolve, REPAIR_RETRY_MS));
      }
    }
  }

  /** Appends rows a re-read brought, which continue `tail`, to the local ledger; returns the new tail. */
  private async applyRead(org: string, tail: Tail, rows: readonly LedgerRow[]): Promise<Tail> {
    if (!this.handed.has(org)) this.handed.set(org, tail.seq);
    const outcome = await this.local.append(org, rows, tail.seq);
    if (!outcome.ok) throw new Error(`the local replica of org ${org} does not continue at seq ${rows[0]!.seq}`);
    const last = rows[rows.length - 1]!;
    this.handed.set(org, last.seq);
    return tailAt(last);
  }

  /**
   * The stream leader's rows do not continue this replica's: its row `seq` (or one before) is
   * not the stream's (a server that served a consumer while cut off from its cluster can
   * hand over messages the cluster then replaced). Rows are never overwritten, so the org is no
   * longer read from here: its keyed reads answer 503 until the data dir is rebuilt, and its
   * writer recovers from the stream itself (`diverged`).
   */
  private diverged(org: string, seq: number, why: string): void {
    this.repairing.delete(org);
    this.divergedAt.mark(org, seq, why);
  }

  /** Whether this node's copy of the org differs from the stream (see `diverged`). */
  hasDiverged(org: string): boolean {
    return this.divergedAt.has(org);
  }

  /** The org's batch at stream sequence `fence` is here. */
  private landed(org: string, fence: number): void {
    this.applied.set(org, fence);
    this.waiters.reached(org, fence);
  }

  /** Saves the partitions' watermarks (with the checkpoints): a partition gained again is read on from there. */
  saveWatermark(): Promise<void> {
    return this.partitions.save();
  }

  /**
   * Resolves once the local ledger holds the org's rows through its last batch in the stream as of
   * now (bounded: else 503 `unavailable`), so a keyed read on any node sees every write
   * acknowledged before it; resolves with that batch's stream sequence (0: none), the fence the
   * org's next append presents. Judged per org from the rows held, not from how far a read got:
   * a read that skipped the org's last batch (the gap `repair` fills when the org's next batch
   * comes) would otherwise pass for caught up, and a writer recovering then would build on
   * missing rows with a stale fence, refused by the stream forever.
   */
  async caughtUp(org: string): Promise<void> {
    await this.catchUp(org);
  }

  private async catchUp(org: string): Promise<StreamTail> {
    const at = this.divergedAt.get(org);
    if (at !== undefined) throw new VigilError('unavailable', `this node's copy of org ${org} differs from the ledger stream at or before seq ${at}; ask another node (an operator rebuilds this one by deleting its data dir)`, undefined, { retryAfterSeconds: 1 });
    const end = Date.now() + (this.options.waitMs ?? 5000);
    let last: StreamTail;
    try {
      last = await within(this.lastStreamBatch(org), end - Date.now(), () => {
        throw behind('the ledger stream did not answer in time');
      });
    } catch (error) {
      throw error instanceof VigilError ? error : behind('the ledger stream did not answer', error);
    }
    if (last.streamSeq === 0) return last;
    if (this.holds(org, last)) {
      // The same seq is not enough: the row must be the stream's (a copy that kept rows the cluster
      // dropped holds other rows at the seqs the stream filled again).
      const mine = this.ledger.get(org, last.seq);
      if (mine !== undefined && !Buffer.from(mine.chainHash).equals(last.hash)) {
        this.diverged(org, last.seq, `row ${last.seq} here is not the stream's`);
        return this.catchUp(org);
      }
      return last;
    }
    // Nothing brings the batch (the org's partition is not read here, or its read went past it),
    // or what should has not for a while: the org is read from the stream.
    const pull = (why: string): void => {
      if (!this.holds(org, last) && !this.repairing.has(org) && !this.closed) this.repair(org, null, why);
    };
    const partition = this.partitionOf(org);
    let seen = this.partitions.progress(partition);
    const coming = (this.localLast.get(org)?.seq ?? 0) >= last.seq || seen >= 0;
    if (!coming) pull(`nothing here brings stream sequence ${last.streamSeq} (rows through ${last.seq})`);
    // A partition's read that goes on bringing batches is waited for; one that stopped moving is not.
    const check = (): void => {
      const now = this.partitions.progress(partition);
      if (now > seen) {
        seen = now;
        late = setTimeout(check, PULL_AFTER_MS);
      } else pull(`stream sequence ${last.streamSeq} did not come in ${PULL_AFTER_MS} ms`);
    };
    let late = setTimeout(check, PULL_AFTER_MS);
    try {
      await this.waiters.wait(org, last.streamSeq, end - Date.now(), () => behind('this node\'s copy of the ledger trails the stream; try again'));
    } finally {
      clearTimeout(late);
    }
    return last;
  }

  /** Whether the local ledger holds the org's rows through the stream's batch `last` (and no repair is under way). */
  private holds(org: string, last: StreamTail): boolean {
    return !this.repairing.has(org) && (this.handed.get(org) ?? this.ledger.last(org)?.seq ?? 0) >= last.seq;
  }

  /**
   * The org's rows from `fromSeq` as the local ledger holds them once caught up with the stream,
   * every batch carrying the stream sequence of the org's last batch there (the fence the next
   * append presents). A new owner recovers from this: a local scan, not one stream get per batch.
   * Rows past the stream's last one (a consumer handed over what the cluster then dropped) mean
   * this copy is not the stream's: the org is marked diverged and read from the stream instead.
   */
  async *readCaughtUp(org: string, fromSeq: number): AsyncIterable<CommittedBatch> {
    const last = await this.catchUp(org);
    const held = this.ledger.last(org)?.seq ?? 0;
    if (held > last.seq) {
      // More rows here than the stream had when asked: another writer's batch just landed, or rows the stream never kept.
      const now = await this.lastStreamBatch(org);
      if (held > now.seq) {
        this.diverged(org, now.seq + 1, `rows ${now.seq + 1}..${held} are held here and not in the stream`);
        yield* this.stream.readWhole(org, fromSeq);
        return;
      }
      throw behind('the org\'s ledger moved while this node read it; try again');
    }
    for await (const batch of this.local.read(org, fromSeq)) yield { ...batch, fence: last.streamSeq };
  }

  private lastStreamBatch(org: string): Promise<StreamTail> {
    return lastStreamBatch(this.jsm, this.stream.names, org);
  }

  private lastStreamRows(org: string): Promise<CommittedBatch | null> {
    return lastStreamRows(this.jsm, this.stream.names, org);
  }

  /** How far the partitions being read from the stream now are behind their end, in stream sequences (0: none is). */
  lag(): Promise<number> {
    return Promise.resolve(this.partitions.lag());
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.partitions.close();
    await this.tail;
  }
}
