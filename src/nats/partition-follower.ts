import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import type { Database } from 'lmdb';
import { ensureError } from '../errors.js';
import type { Logger } from '../log.js';
import { RepeatedFailure } from '../repeated-failure.js';
import type { LedgerStreamNames } from './ledger-stream.js';
import { catchUpPartition } from './partition-catch-up.js';

/** A partition's watermark in the meta table. */
const watermarkKey = (partition: number): string => `partition:${partition}`;
/** How long a failed read of a partition waits before the next. */
const RETRY_MS = 1000;

export interface PartitionFollowerOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: LedgerStreamNames;
  /** Where the watermarks are kept (a table of this node's LMDB). */
  meta: Database<number, string>;
  /**
   * When a gained partition is read the second time: after the previous owner's last append can
   * have been stored (its lease, plus the append timeout, plus a margin).
   */
  secondReadMs: number;
  log: Logger;
}

/** What the follower needs of the copy it feeds. */
export interface FollowedCopy {
  /** Applies one message of a partition (in stream order). */
  deliver(message: JsMsg): void;
  /** Resolves once what was delivered so far is in the local ledger. */
  landed(): Promise<unknown>;
  /** Whether an org of the partition is being read again (it lacks rows below what was read of the partition). */
  repairing(partition: number): boolean;
  /** Whether this node holds the partition's lease now. */
  owns(partition: number): boolean;
}

interface Following {
  stopped: boolean;
  /** The first read from the stream has ended. */
  read: boolean;
  /** The second has too: own appends move the watermark. */
  settled: boolean;
  firstRead: Promise<void>;
  done: () => void;
  /** The read under way, how far (null: none). */
  reading: { reached: number; end: number } | null;
  /** Ends a wait between reads at once (the partition lost, the node closing). */
  wake: () => void;
}

/**
 * The partitions this node owns, read from the ledger stream when gained: each from its
 * watermark (the stream sequence up to which every batch of it is in the local ledger, saved
 * with the checkpoints), through one consumer filtered on its subjects, and once more
 * `secondReadMs` later for a batch the previous owner appended as its lease ran out. After that
 * second read the owner's own appends move the watermark (`ownAppend`), while it still holds the
 * lease and no org of the partition is being read again; a watermark is lowered, never raised,
 * past rows an org is found to lack (`lower`).
 */
export class PartitionFollower {
  private readonly watermarks = new Map<number, number>();
  private readonly followed = new Map<number, Following>();
  private readonly loops = new Set<Promise<void>>();
  private closed = false;

  constructor(
    private readonly copy: FollowedCopy,
    private readonly options: PartitionFollowerOptions,
  ) {}

  /** Partitions gained: each read now and once more later, retried every second until it succeeds or is lost. */
  follow(partitions: readonly number[]): void {
    for (const partition of partitions) {
      if (this.closed || this.followed.has(partition)) continue;
      let done = (): void => undefined;
      const following: Following = {
        stopped: false,
        read: false,
        settled: false,
        firstRead: new Promise<void>((resolve) => (done = resolve)),
        done: () => done(),
        reading: null,
        wake: () => undefined,
      };
      this.followed.set(partition, following);
      const loop = this.readPartition(partition, following)
        .catch((error: unknown) => this.options.log.error({ partition, err: ensureError(error) }, 'ledger replica: reading a gained partition stopped'))
        .finally(() => {
          following.done();
          this.loops.delete(loop);
        });
      this.loops.add(loop);
    }
  }

  /** Partitions lost: their reads stop (rows read so far stay, and are read on from there next time). */
  unfollow(partitions: readonly number[]): void {
    for (const partition of partitions) {
      const following = this.followed.get(partition);
      if (following === undefined) continue;
      this.followed.delete(partition);
      this.stop(following);
    }
  }

  /** Whether the partition is followed and its first read since it was gained has ended. */
  hasRead(partition: number): boolean {
    return this.followed.get(partition)?.read === true;
  }

  /** Whether both reads of the partition since it was gained have ended. */
  settled(partition: number): boolean {
    return this.followed.get(partition)?.settled === true;
  }

  /** Resolves once the partition's first read since it was gained has ended (or it was lost meanwhile). */
  firstRead(partition: number): Promise<void> {
    return this.followed.get(partition)?.firstRead ?? Promise.resolve();
  }

  /** How far the partition's read under way has come (-1: none is under way). */
  progress(partition: number): number {
    return this.followed.get(partition)?.reading?.reached ?? -1;
  }

  /** How many stream sequences the reads under way are behind their ends, at most (0: none is). */
  lag(): number {
    let most = 0;
    for (const { reading } of this.followed.values()) if (reading !== null) most = Math.max(most, reading.end - reading.reached);
    return most;
  }

  /** The watermark of a partition (0: nothing of it is known to be held). */
  watermarkOf(partition: number): number {
    let watermark = this.watermarks.get(partition);
    if (watermark === undefined) {
      watermark = this.options.meta.get(watermarkKey(partition)) ?? 0;
      this.watermarks.set(partition, watermark);
    }
    return watermark;
  }

  /** An org of the partition lacks rows after stream sequence `held`: the watermark does not claim them. */
  lower(partition: number, held: number): void {
    if (this.watermarkOf(partition) > held) this.watermarks.set(partition, held);
  }

  /** This node's own append of the partition, landed here at stream sequence `fence`. */
  ownAppend(partition: number, fence: number): void {
    if (this.settled(partition) && this.copy.owns(partition) && !this.copy.repairing(partition)) {
      this.watermarks.set(partition, Math.max(this.watermarkOf(partition), fence));
    }
  }

  /** Saves the watermarks (with the checkpoints): a partition gained again is read on from there. */
  async save(): Promise<void> {
    for (const [partition, watermark] of this.watermarks) {
      if (this.options.meta.get(watermarkKey(partition)) !== watermark) await this.options.meta.put(watermarkKey(partition), watermark);
    }
  }

  /** Stops every read and waits for them to end. */
  async close(): Promise<void> {
    this.closed = true;
    for (const following of this.followed.values()) this.stop(following);
    this.followed.clear();
    await Promise.all([...this.loops]);
  }

  private stop(following: Following): void {
    following.stopped = true;
    following.settled = false;
    following.wake();
    following.done();
  }

  private async readPartition(partition: number, following: Following): Promise<void> {
    const failed = new RepeatedFailure();
    const stopped = (): boolean => following.stopped || this.closed;
    for (let reads = 0; reads < 2 && !stopped(); ) {
      try {
        const after = this.watermarkOf(partition);
        following.reading = { reached: after, end: after };
        const reached = await catchUpPartition({
          js: this.options.js,
          jsm: this.options.jsm,
          names: this.options.names,
          partition,
          after,
          deliver: (message) => this.copy.deliver(message),
          stopped,
          progress: (at, end) => (following.reading = { reached: at, end }),
        });
        await this.copy.landed();
        following.reading = null;
        if (stopped()) return;
        // An org of the partition being read again lacks rows below `reached`: not past them.
        if (!this.copy.repairing(partition)) this.watermarks.set(partition, Math.max(this.watermarkOf(partition), reached));
        reads++;
        if (reads === 1) {
          following.read = true;
          following.done();
          await this.sleep(following, this.options.secondReadMs);
        } else following.settled = true;
      } catch (error) {
        following.reading = null;
        const err = ensureError(error);
        if (failed.note(err.message)) this.options.log.warn({ partition, err }, 'ledger replica: reading a gained partition failed; retrying every second');
        await this.sleep(following, RETRY_MS);
      }
    }
  }

  private sleep(following: Following, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      following.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
