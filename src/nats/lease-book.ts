import type { Logger } from '../log.js';
import type { LeaseWrite } from './lease-bucket.js';

/** A lease this node wrote: its revision in the bucket, and until when (local clock) it may act on it. */
export interface Lease {
  revision: number;
  validUntil: number;
}

/** An ownership change: `gained` only once the lease is stored, `lost` as soon as it is known. */
export interface OwnershipChange {
  gained: number[];
  lost: number[];
}

const ascending = (a: number, b: number): number => a - b;

/**
 * The leases one holder has, each in one state, and the changes of what it owns:
 *
 * - held: owned while `validUntil` (local clock) is ahead; a timer tells `lost` when it passes.
 * - lapsed: validity ran out (or the watch showed another write); renewed with its revision
 *   until refused (gone) or renewed (held again, `gained`).
 * - releasing: given up (`lost` at once), to be deleted at its latest revision.
 *
 * Everything here is synchronous: a change is applied and told in one step, so nothing sees a
 * lease half-moved. Listeners are called in the order changes happen; one that throws is logged.
 */
export class LeaseBook {
  private readonly held = new Map<number, Lease>();
  private readonly lapsed = new Map<number, Lease>();
  private readonly releasing = new Map<number, Lease>();
  private readonly listeners = new Set<(change: OwnershipChange) => void>();
  private expiryTimer: NodeJS.Timeout | null = null;
  private timed = true;

  constructor(
    private readonly now: () => number,
    private readonly log: Logger,
  ) {}

  owns(partition: number): boolean {
    const lease = this.held.get(partition);
    return lease !== undefined && lease.validUntil > this.now();
  }

  owned(): number[] {
    const now = this.now();
    return [...this.held].filter(([, lease]) => lease.validUntil > now).map(([partition]) => partition).sort(ascending);
  }

  onChange(listener: (change: OwnershipChange) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** Held and lapsed leases: what counts against a fair share. */
  get count(): number {
    return this.held.size + this.lapsed.size;
  }

  /** Whether the partition has a lease here in any state. */
  has(partition: number): boolean {
    return this.held.has(partition) || this.lapsed.has(partition) || this.releasing.has(partition);
  }

  isHeld(partition: number): boolean {
    return this.held.has(partition);
  }

  /** Held and lapsed leases, by partition: those a round renews. */
  renewable(): [number, Lease][] {
    return [...this.held, ...this.lapsed].sort(([a], [b]) => a - b);
  }

  /** Outcomes of a round's renewals (the lease objects were updated by the renewals that succeeded). */
  settleRenewals(outcomes: { partition: number; lease: Lease; written: LeaseWrite }[]): void {
    const now = this.now();
    const gained: number[] = [];
    const lost: number[] = [];
    const gone: number[] = [];
    for (const { partition, lease, written } of outcomes) {
      const refused = !written.ok && written.reason === 'refused';
      if (refused && this.held.get(partition) === lease) {
        this.held.delete(partition);
        lost.push(partition);
      } else if (refused && this.lapsed.get(partition) === lease) {
        this.lapsed.delete(partition);
        gone.push(partition);
      } else if (written.ok && this.lapsed.get(partition) === lease && lease.validUntil > now) {
        this.lapsed.delete(partition);
        this.held.set(partition, lease);
        gained.push(partition);
      }
    }
    if (lost.length > 0) this.log.warn({ partitions: lost }, 'partition leases lost: renewal refused (expired or taken)');
    if (gone.length > 0) this.log.info({ partitions: gone }, 'lapsed partition leases: renewal refused (expired or taken meanwhile)');
    this.changed(gained, lost);
  }

  /** Leases a round's claims won; with `closing`, they go straight to releasing. */
  settleClaims(won: { partition: number; lease: Lease }[], closing: boolean): void {
    const gained: number[] = [];
    for (const { partition, lease } of won) {
      if (closing) this.releasing.set(partition, lease);
      else if (lease.validUntil <= this.now()) this.lapsed.set(partition, lease); // answered too late to act on
      else {
        this.held.set(partition, lease);
        gained.push(partition);
      }
    }
    this.changed(gained, []);
  }

  /** Held leases whose validity ran out become lapsed: lost now. */
  expire(): void {
    const now = this.now();
    const lost: number[] = [];
    for (const [partition, lease] of this.held) {
      if (lease.validUntil > now) continue;
      this.held.delete(partition);
      this.lapsed.set(partition, lease);
      lost.push(partition);
    }
    lost.sort(ascending);
    if (lost.length > 0) this.log.warn({ partitions: lost }, 'partition leases lapsed: not renewed in time');
    this.changed([], lost);
  }

  /** The watch showed another holder's write (or a delete) newer than a held lease: it ended unnoticed. */
  overtaken(partition: number, revision: number, holder: string | null): void {
    const lease = this.held.get(partition);
    if (lease === undefined || revision <= lease.revision) return;
    this.log.warn({ partition, holder }, 'partition lease written by another holder while valid here (do clocks disagree?)');
    this.held.delete(partition);
    this.lapsed.set(partition, lease); // its renewal will be refused
    this.changed([], [partition]);
  }

  /** Gives up held and lapsed leases of `partitions`: lost now, deleted by `takeReleasing`'s caller. */
  release(partitions: Iterable<number>): void {
    const lost: number[] = [];
    for (const partition of partitions) {
      const held = this.held.get(partition);
      if (held !== undefined) lost.push(partition);
      const lease = held ?? this.lapsed.get(partition);
      if (lease === undefined) continue;
      this.held.delete(partition);
      this.lapsed.delete(partition);
      this.releasing.set(partition, lease);
    }
    this.changed([], lost);
  }

  releaseAll(): void {
    this.release([...this.held.keys(), ...this.lapsed.keys()]);
  }

  /** The released leases, to delete now at their revisions. */
  takeReleasing(): [number, Lease][] {
    const leases = [...this.releasing];
    this.releasing.clear();
    return leases;
  }

  /** Stops (false) or resumes (true) telling expiry by timer: off when closed or frozen. */
  setTimed(timed: boolean): void {
    this.timed = timed;
    this.armExpiry();
  }

  private changed(gained: number[], lost: number[]): void {
    this.armExpiry();
    if (gained.length === 0 && lost.length === 0) return;
    const change = { gained: [...gained].sort(ascending), lost: [...lost].sort(ascending) };
    this.log.info({ ...change, owned: this.held.size }, 'partition ownership changed');
    for (const listener of this.listeners) {
      try {
        listener(change);
      } catch (error) {
        this.log.error({ err: error }, 'partition leases: a change listener threw');
      }
    }
  }

  /** Lost is told when local validity runs out, not at the next round. */
  private armExpiry(): void {
    if (this.expiryTimer !== null) clearTimeout(this.expiryTimer);
    this.expiryTimer = null;
    if (!this.timed || this.held.size === 0) return;
    const next = Math.min(...[...this.held.values()].map((lease) => lease.validUntil));
    this.expiryTimer = setTimeout(() => {
      this.expiryTimer = null;
      this.expire();
    }, Math.max(0, next - this.now()));
    this.expiryTimer.unref();
  }
}
