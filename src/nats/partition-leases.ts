import { randomBytes } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { ensureError } from '../errors.js';
import type { Logger } from '../log.js';
import { RepeatedFailure } from '../repeated-failure.js';
import { LeaseBook, type Lease, type OwnershipChange } from './lease-book.js';
import { LeaseBucket, type LeaseWrite } from './lease-bucket.js';
import { fairShare, preferenceOrder } from './lease-plan.js';
import { LeaseView, type LeaseValue, type SeenKey } from './lease-view.js';
import { partitionOf } from './partition.js';

export interface PartitionLeasesOptions {
  /** Display name of this node (e.g. its host name), shown in lease values. */
  node: string;
  /** VIGIL_PARTITIONS. */
  partitions: number;
  /** VIGIL_LEASE_SECONDS: the lease bucket's ttl when this node creates it. */
  leaseSeconds: number;
  /** Replicas of the lease bucket when this node creates it. */
  replicas: number;
  /** Default `vigil_leases`; tests pass their own. */
  bucket?: string;
  log: Logger;
  /** The clock of local validity, in ms. Default: monotonic (`performance.now`), so a wall-clock step cannot stretch a lease. */
  now?: () => number;
}

export type { OwnershipChange } from './lease-book.js';

export const LEASE_BUCKET = 'vigil_leases';

const NODE_PREFIX = 'node.';
const PARTITION_PREFIX = 'partition.';
const keyOf = (partition: number): string => `${PARTITION_PREFIX}${partition}`;
/** A watch that is behind is replaced, but not sooner than this after it was made. */
const RESTART_GRACE_MS = 5_000;

/**
 * One owner per partition across the cluster (DESIGN §8), through leases in a replicated KV
 * bucket whose ttl is the lease: key `partition.<n>` holds `{holder, node, at}` of its owner.
 *
 * - Claim: `create` (fails if the key exists). Renew: `update` with the revision this holder last
 *   wrote; refused (the key expired, or another holder wrote it) means the lease is lost. Release:
 *   `delete` with that revision, so a release never removes another holder's lease.
 * - Local validity: a lease counts as owned until the time its last successful create or update
 *   was *sent* + 3/4 of the lease. The server stamps the write after it was sent and keeps the
 *   key a whole lease from then, so `owns` turns false a quarter lease before another node can
 *   create the key, on the local clock alone: when renewals stop succeeding (NATS unreachable,
 *   process paused) nothing needs to run for `owns` to turn false. A lapsed lease is renewed
 *   with its old revision: it comes back if nobody wrote the key meanwhile, else it is refused.
 * - Rounds every lease/3: renew held leases, announce this node (key `node.<id>`, renewed like a
 *   lease, so it expires with the node), then, from a view of the bucket (LeaseView), compute the
 *   fair share ceil(partitions / live nodes): below it, claim free partitions (deleted, or not
 *   renewed for 5/4 of a lease) in this holder's preference order (losing a race is normal);
 *   above it, release the surplus from the back of that order. A partition this node released
 *   is not claimed back by it for a lease, unless another node took it meanwhile. While the view
 *   is behind (its watch lost with a server), claims go on up to the last share, releases wait.
 * - Failover: a dead node's leases expire a lease after its last renewal; others claim them
 *   within about 5/4 + 1/3 of a lease after that. A closing node releases them: at once.
 *
 * `holder` is `<node>:<random>`, new for each process: a restarted node owns nothing its previous
 * process held. Listeners are called synchronously, in the order changes are known. Rounds,
 * releases and close are serialized; `owns` and `owned` may be called at any time. The ledger's
 * correctness does not rest on leases (JetStream's expected-last-subject-sequence fence refuses a
 * stale writer); leases keep one writer at a time in the normal case.
 *
 * The connection is borrowed: the caller closes it after `close`.
 */
export class PartitionLeases {
  readonly holder: string;
  private readonly id: string;
  private readonly nodeKey: string;
  private readonly leaseMs: number;
  private readonly tickMs: number;
  private readonly validMs: number;
  private readonly order: number[];
  private readonly view: LeaseView;
  private readonly book: LeaseBook;
  /** Partitions not to claim before a time: released here (for another node), or found taken. */
  private readonly notBefore = new Map<number, number>();
  /** The fair share the view last showed, claimed up to while the view is behind; null before. */
  private target: number | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private tickTimer: NodeJS.Timeout | null = null;
  private started = false;
  private frozen = false;
  private closed = false;
  private announced = false;
  /** Rounds in a row whose view was behind. */
  private behind = 0;
  /** Errors of NATS requests in the current round; the rounds in a row that had some. */
  private errors: unknown[] = [];
  private readonly failing = new RepeatedFailure();
  /** This node's base URL, written into its lease values once known (see `advertise`). */
  private url: string | null = null;

  private constructor(
    private readonly bucket: LeaseBucket,
    private readonly options: PartitionLeasesOptions,
    private readonly now: () => number,
  ) {
    this.leaseMs = bucket.ttlMs;
    this.id = randomBytes(6).toString('hex');
    this.holder = `${options.node}:${this.id}`;
    this.nodeKey = `${NODE_PREFIX}${this.id}`;
    this.tickMs = this.leaseMs / 3;
    this.validMs = this.leaseMs - this.leaseMs / 4;
    this.order = preferenceOrder(this.holder, options.partitions);
    this.book = new LeaseBook(now, options.log);
    this.view = new LeaseView(bucket.watchKv, now, options.log, (key, seen) => this.noticed(key, seen));
  }

  /**
   * Creates the lease bucket if absent (idempotent: nodes may start together) and starts watching
   * it; `start` begins claiming. An existing bucket keeps its ttl, and that ttl is the lease here
   * too (a node configured otherwise logs a warning), so all nodes agree on how long a lease lasts.
   */
  static async open(nc: NatsConnection, options: PartitionLeasesOptions): Promise<PartitionLeases> {
    partitionOf('', options.partitions); // validates the count
    if (!(options.leaseSeconds > 0)) throw new Error(`leaseSeconds must be positive, not ${options.leaseSeconds}`);
    const bucket = await LeaseBucket.open(nc, { bucket: options.bucket ?? LEASE_BUCKET, ttlMs: Math.round(options.leaseSeconds * 1000), replicas: options.replicas, log: options.log });
    const leases = new PartitionLeases(bucket, options, options.now ?? (() => performance.now()));
    await leases.view.start();
    return leases;
  }

  owns(partition: number): boolean {
    return this.book.owns(partition);
  }

  owned(): number[] {
    return this.book.owned();
  }

  /**
   * Names this node's base URL in its lease and node values from the next round on (run at once),
   * so other nodes can tell clients where each partition's owner is. Called once the node listens.
   */
  advertise(url: string): void {
    this.url = url;
    this.schedule(0);
  }

  /**
   * Each partition's owner as this node knows it: its base URL, or null (no live lease, or its
   * holder has not advertised a URL yet). Read from the view, so another node's change shows up
   * as fast as the watch delivers it; this node's own leases from its book.
   */
  ownerUrls(): (string | null)[] {
    return Array.from({ length: this.options.partitions }, (_, partition) => {
      if (this.book.owns(partition)) return this.url;
      const key = keyOf(partition);
      return this.view.live(key, this.leaseMs) ? (this.view.get(key)?.url ?? null) : null;
    });
  }

  onChange(listener: (change: OwnershipChange) => void): () => void {
    return this.book.onChange(listener);
  }

  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    this.schedule(0);
  }

  /** Gives partitions up (lost at once), then deletes their leases so another node can take them. */
  async release(partitions: number[]): Promise<void> {
    this.book.release(partitions);
    await this.exclusive(() => this.drain());
  }

  /** Stops the rounds and releases every lease and the node's announcement: a fast handover. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopTimers();
    this.book.releaseAll();
    await this.exclusive(async () => {
      // The announcement goes first: others then see one node fewer, and a larger share to take.
      const retracted = this.announced ? await this.bucket.retract(this.nodeKey) : null;
      if (retracted?.ok === false) this.options.log.warn({ outcome: retracted }, 'partition leases: node announcement not deleted; it expires on its own');
      await this.drain();
    });
    this.view.stop();
  }

  /**
   * Test seam, not for production: stops this holder as SIGSTOP stops a process (no rounds, no
   * expiry timer; requests already sent complete, the watch keeps reading). `thawForTests`
   * resumes it as SIGCONT would: overdue timers fire at once.
   */
  freezeForTests(): void {
    this.frozen = true;
    this.stopTimers();
  }

  thawForTests(): void {
    this.frozen = false;
    this.book.setTimed(!this.closed);
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.closed || this.frozen || !this.started) return;
    if (this.tickTimer !== null) clearTimeout(this.tickTimer);
    this.tickTimer = setTimeout(() => {
      this.tickTimer = null;
      void this.round();
    }, Math.max(0, delayMs));
    this.tickTimer.unref();
  }

  private stopTimers(): void {
    if (this.tickTimer !== null) clearTimeout(this.tickTimer);
    this.tickTimer = null;
    this.book.setTimed(false);
  }

  private async round(): Promise<void> {
    const began = this.now();
    try {
      await this.exclusive(() => this.tick());
    } catch (error) {
      this.options.log.error({ err: error }, 'partition leases: a round failed');
    }
    this.schedule(began + this.tickMs - this.now());
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async tick(): Promise<void> {
    if (this.closed || this.frozen) return;
    this.errors = [];
    this.book.expire();
    const [announced] = await Promise.all([this.announce(), this.renewAll()]);
    if (this.closed || this.frozen) return;
    // The view is current once it shows this node's own announcement of this round.
    const current = this.view.watching && announced !== null && (await this.view.reached(announced, this.tickMs / 2));
    if (current) {
      this.behind = 0;
      this.view.prune(10 * this.leaseMs);
    } else if (!this.view.watching || (++this.behind >= 2 && this.view.age > Math.max(2 * this.leaseMs, RESTART_GRACE_MS))) {
      // A new watch gets time to catch up (making its consumer can take seconds after a server died).
      this.options.log.warn({ behind: this.behind }, 'partition leases: the view of the bucket is behind; watch restarted');
      this.behind = 0;
      this.view.restart();
    }
    if (!this.closed && !this.frozen) await this.rebalance(current);
    this.reportErrors();
  }

  private async announce(): Promise<number | null> {
    const written = this.noted(await this.bucket.announce(this.nodeKey, this.value()));
    this.announced ||= written.ok;
    return written.ok ? written.revision : null;
  }

  /** Renews held and lapsed leases, each valid from when its renewal was sent (the server keeps it a lease from a later time). */
  private async renewAll(): Promise<void> {
    const outcomes = await Promise.all(
      this.book.renewable().map(async ([partition, lease]) => {
        const sent = this.now();
        const written = this.noted(await this.bucket.renew(keyOf(partition), this.value(), lease.revision, this.holder));
        if (written.ok) {
          lease.revision = written.revision;
          lease.validUntil = sent + this.validMs;
        }
        return { partition, lease, written };
      }),
    );
    this.book.settleRenewals(outcomes);
  }

  /**
   * With a current view: the fair share of the live nodes, claimed up to or released down to.
   * Behind: claims only, up to the share last known (claims are conditional, and a key the view
   * has not seen renewed for a lease is free or about to be); releases wait for a current view.
   */
  private async rebalance(current: boolean): Promise<void> {
    const live = new Set(this.view.liveUnder(NODE_PREFIX, this.leaseMs)).add(this.id);
    if (current) this.target = fairShare(this.options.partitions, live.size);
    if (this.target === null) return;
    const mine = this.book.count;
    if (current && mine > this.target) {
      const surplus = [...this.order].reverse().filter((p) => this.book.isHeld(p)).slice(0, mine - this.target);
      this.options.log.info({ nodes: live.size, target: this.target, partitions: surplus }, 'partition leases: releasing the surplus over a fair share');
      this.book.release(surplus);
      await this.drain();
    } else if (mine < this.target) {
      const now = this.now();
      const wanted = this.order.filter((p) => this.claimable(p, now)).slice(0, this.target - mine);
      const claims = await Promise.all(wanted.map(async (partition) => ({ partition, lease: await this.claim(partition) })));
      // Registered together, synchronously: nothing (expiry, close, a watch event) sees a lease half-taken.
      this.book.settleClaims(claims.filter((c): c is { partition: number; lease: Lease } => c.lease !== null), this.closed);
    }
  }

  /**
   * Not held here, not held off, and not held elsewhere: deleted, or not renewed for a lease and
   * a quarter. The quarter lets every replica expire the key first: on nats-server 2.9 each
   * replica expires by its own clock, and a create while they disagree would store on some and
   * not others (nats-server#5794, fixed in 2024, long after 2.9.10).
   */
  private claimable(partition: number, now: number): boolean {
    if (this.book.has(partition) || (this.notBefore.get(partition) ?? 0) > now) return false;
    return !this.view.live(keyOf(partition), this.leaseMs + this.leaseMs / 4);
  }

  /** A lease of a partition nobody holds, or null if another holder was first (or NATS failed). */
  private async claim(partition: number): Promise<Lease | null> {
    const sent = this.now();
    const written = this.noted(await this.bucket.claim(keyOf(partition), this.value()));
    if (written.ok) return { revision: written.revision, validUntil: sent + this.validMs };
    // Taken: not tried again for a third of a lease, so a view that lags moves on to other partitions.
    if (written.reason === 'refused') this.notBefore.set(partition, this.now() + this.tickMs);
    return null;
  }

  /** Deletes the released leases at their latest revision (serialized: no renewal is in flight). */
  private async drain(): Promise<void> {
    const until = this.now() + this.leaseMs;
    await Promise.all(
      this.book.takeReleasing().map(async ([partition, lease]) => {
        this.notBefore.set(partition, until);
        const written = await this.bucket.release(keyOf(partition), lease.revision);
        // Refused: it expired or moved on already. Failed: it expires within a lease.
        if (!written.ok && written.reason === 'failed') this.options.log.warn({ err: written.error, partition }, 'partition lease not deleted on release; it expires on its own');
      }),
    );
  }

  /**
   * A write the watch shows. Another holder's lease of a partition: a hold-off on it has done its
   * work (it may come back to this node at once if released again); if it is held here, the
   * lease here ended unnoticed.
   */
  private noticed(key: string, seen: SeenKey): void {
    if (!key.startsWith(PARTITION_PREFIX) || (seen.put && seen.holder === this.holder)) return;
    const partition = Number(key.slice(PARTITION_PREFIX.length));
    if (seen.put) this.notBefore.delete(partition);
    this.book.overtaken(partition, seen.revision, seen.holder);
  }

  /** Keeps a failed write's error for the round's report. */
  private noted(written: LeaseWrite): LeaseWrite {
    if (!written.ok && written.reason === 'failed') this.errors.push(written.error);
    return written;
  }

  /** Rounds with failed requests: the first, a new reason, every 30th (10 leases at most apart), and the end of it. */
  private reportErrors(): void {
    if (this.errors.length > 0) {
      const err = ensureError(this.errors[0]);
      if (this.failing.note(err.message)) this.options.log.warn({ err, count: this.errors.length, rounds: this.failing.failures }, 'partition leases: NATS requests failing; leases lapse if this lasts');
    } else if (this.failing.failures > 0) {
      this.options.log.info({ rounds: this.failing.clear() }, 'partition leases: NATS requests succeed again');
    }
  }

  private value(): string {
    const value: LeaseValue = { holder: this.holder, node: this.options.node, at: new Date().toISOString(), ...(this.url === null ? {} : { url: this.url }) };
    return JSON.stringify(value);
  }
}
