import type { LedgerRow } from '../domain/ledger.js';
import { ensureError } from '../errors.js';
import type { Logger } from '../log.js';
import type { WebhookRegistry } from '../services/webhook-registry.js';
import type { DeliveryRecord, WebhookStore } from '../store/webhook-store.js';
import type { DeliveryMaker } from './delivery-maker.js';
import type { DeliveryScope } from './delivery-scope.js';
import type { DeliveryWriter } from './delivery-writer.js';

/** What the ownership drives in the delivery actor. */
export interface OwnedQueue {
  /** Schedules stored queued deliveries (they are sent when due). */
  enqueue(records: readonly DeliveryRecord[]): void;
  /** Forgets the org's queued deliveries: this node no longer sends them. */
  drop(org: string): void;
}

/** How long a failed take-over waits before it is tried again. */
const RETRY_MS = 1000;

/**
 * Cluster mode's side of the delivery actor: only the org's owner makes, stores and sends its
 * deliveries, and an org that changes hands is taken over from the shared store.
 *
 * Taking over (`take`, or the org's first committed batch here): once this node's copies of the
 * ledger and of the webhook store hold the org's acknowledged writes, what memory held of the org
 * is dropped, its cursor and queued deliveries are loaded from the store (the queued ones resume
 * on their schedule) and the ledger rows past the cursor are turned into deliveries: rows whose
 * writer appended them but died before storing their deliveries (normally none: the writer stores
 * them before answering). Until then the org's batches wait (in order), so every row is turned
 * into deliveries once, either here or by the take-over.
 *
 * Giving up (`release`): the org's queued deliveries and whatever is held for it are dropped at
 * once; an attempt in flight completes but its outcome is not recorded (`current` changed), so the
 * new owner sends it again with the same delivery id: at least once, never counted twice. A write
 * the store refused (another node wrote the org's deliveries first: the lease moved and back)
 * is the same as giving the org up and taking it over again.
 *
 * Each org has an epoch, bumped whenever it is taken over or given up; work that awaited
 * something checks it is still in the epoch it began in before it changes anything.
 */
export class DeliveryOwnership {
  /** Orgs being taken over or taken over, and not given up since: their deliveries are sent from here. */
  private readonly held = new Set<string>();
  /** Orgs taken over (their rows past the cursor made): their batches are made as they come. */
  private readonly ready = new Set<string>();
  private readonly epochs = new Map<string, number>();
  private readonly taking = new Map<string, Promise<void>>();
  /** Per org, the tail of its committed batches (turned into deliveries in seq order). */
  private readonly tails = new Map<string, Promise<void>>();
  private readonly retries = new Map<string, NodeJS.Timeout>();
  private closed = false;

  constructor(
    private readonly scope: DeliveryScope,
    private readonly store: WebhookStore,
    private readonly webhooks: WebhookRegistry,
    private readonly writer: DeliveryWriter,
    private readonly maker: DeliveryMaker,
    private readonly queue: OwnedQueue,
    private readonly log: Logger,
  ) {}

  /** The org's epoch if this node sends its deliveries now, else null. */
  current(org: string): number | null {
    return this.held.has(org) && this.scope.owns(org) ? this.epoch(org) : null;
  }

  /** The org's epoch once this node sends its deliveries (taking it over first if need be); null if it does not own it. */
  async hold(org: string): Promise<number | null> {
    if (!this.scope.owns(org)) return null;
    if (!this.ready.has(org)) await this.takeOver(org);
    return this.current(org);
  }

  /**
   * Makes (and stores, before it settles) the deliveries of a batch of the org: one this node's
   * writer appended, or one its copy of the ledger received (from whichever node appended it).
   * Whichever comes first makes them; the other finds them made.
   */
  committed(org: string, rows: readonly LedgerRow[]): Promise<void> | undefined {
    // Not the owner (any more): the owner makes them from the ledger past the stored cursor.
    if (!this.scope.owns(org)) return undefined;
    const run = (this.tails.get(org) ?? Promise.resolve()).then(() => this.makeThrough(org, rows));
    const tail = run.catch((error: unknown) => this.log.error({ org, err: ensureError(error) }, 'deliveries of a committed batch could not be made'));
    this.tails.set(org, tail);
    void tail.then(() => {
      if (this.tails.get(org) === tail) this.tails.delete(org);
    });
    return tail;
  }

  /** Partitions gained: takes over the orgs with webhooks among `which` (others on their first batch). */
  take(which: (org: string) => boolean): void {
    for (const org of this.webhooks.orgs()) if (which(org) && this.scope.owns(org)) void this.takeOver(org);
  }

  /** Partitions lost: stops sending and storing for the orgs among `which`. */
  release(which: (org: string) => boolean): void {
    const known = new Set([...this.held, ...this.taking.keys(), ...this.epochs.keys()]);
    for (const org of known) if (which(org)) this.giveUp(org);
  }

  /** The store refused a write of these orgs: another node wrote first. Reloaded from the store. */
  refused(orgs: readonly string[]): void {
    for (const org of orgs) {
      this.log.warn({ org }, 'deliveries: another node wrote this org\'s deliveries first; reloading them from the store');
      this.giveUp(org);
      if (this.scope.owns(org)) void this.takeOver(org);
    }
  }

  /** A webhook of an org owned here but not taken over yet (its first): take it over now. */
  noticed(org: string): void {
    if (!this.ready.has(org) && this.scope.owns(org)) void this.takeOver(org);
  }

  close(): void {
    this.closed = true;
    for (const timer of this.retries.values()) clearTimeout(timer);
    this.retries.clear();
  }

  private epoch(org: string): number {
    return this.epochs.get(org) ?? 0;
  }

  private bump(org: string): number {
    const next = this.epoch(org) + 1;
    this.epochs.set(org, next);
    return next;
  }

  private giveUp(org: string): void {
    this.held.delete(org);
    this.ready.delete(org);
    this.bump(org);
    this.queue.drop(org);
    this.writer.reset(org, undefined);
  }

  private takeOver(org: string): Promise<void> {
    const running = this.taking.get(org);
    if (running !== undefined) return running;
    const run = this.load(org).finally(() => this.taking.delete(org));
    this.taking.set(org, run);
    return run;
  }

  private async load(org: string): Promise<void> {
    try {
      // A write of an earlier epoch may still be under way: the store's view must include it.
      await this.writer.settled();
      await this.scope.caughtUp(org);
    } catch (error) {
      this.log.warn({ org, err: ensureError(error), retry_ms: RETRY_MS }, 'deliveries: cannot take this org over yet; retrying');
      this.retryLater(org);
      return;
    }
    if (this.closed || !this.scope.owns(org)) return;
    const epoch = this.bump(org);
    this.held.add(org);
    this.queue.drop(org);
    const cursor = this.store.deliveryCursors().get(org);
    this.writer.reset(org, cursor);
    this.queue.enqueue(this.store.queuedDeliveries(org));
    const last = this.scope.ledger.last(org)?.seq ?? 0;
    const from = this.firstUseful(org, cursor ?? 0);
    if (from <= last) await this.make(org, epoch, last, [...this.scope.ledger.range(org, from, last)]);
    if (this.epoch(org) === epoch && this.scope.owns(org)) this.ready.add(org);
  }

  /**
   * The first row after `seen` that can make a delivery: rows no active webhook is older than make
   * none (Infinity: the org has no active webhook). The cursor is left behind such rows: a later
   * batch or take-over starts from here, not from the cursor.
   */
  private firstUseful(org: string, seen: number): number {
    const active = this.webhooks.list(org).filter((w) => w.active);
    if (active.length === 0) return Infinity;
    return Math.max(seen, Math.min(...active.map((w) => w.after_seq))) + 1;
  }

  private retryLater(org: string): void {
    if (this.closed || this.retries.has(org)) return;
    const timer = setTimeout(() => {
      this.retries.delete(org);
      if (!this.ready.has(org) && this.scope.owns(org)) void this.takeOver(org);
    }, RETRY_MS);
    timer.unref();
    this.retries.set(org, timer);
  }

  private async makeThrough(org: string, rows: readonly LedgerRow[]): Promise<void> {
    if (!this.ready.has(org)) {
      await this.takeOver(org);
      // Not taken over (yet): these rows are past the stored cursor, so the take-over makes them.
      if (!this.ready.has(org)) return;
    }
    const epoch = this.epoch(org);
    const from = this.firstUseful(org, this.writer.seenOf(org) ?? 0);
    const last = rows[rows.length - 1]!.seq;
    if (from > last) return;
    let todo = rows.filter((row) => row.seq >= from);
    const first = todo[0]!;
    if (first.seq > from) {
      // Rows before this batch not turned into deliveries yet: ones another writer appended after
      // this node took the org over (its previous owner, late), or ones that came before a webhook
      // this node learnt of late. The writer here started from them, so the local ledger has them.
      const gap = [...this.scope.ledger.range(org, from, first.seq - 1)];
      if (gap.length !== first.seq - from) {
        this.log.error({ org, from, to: first.seq - 1 }, 'deliveries: rows missing from the local ledger; taking the org over again');
        this.giveUp(org);
        void this.takeOver(org);
        return;
      }
      todo = [...gap, ...todo];
    }
    await this.make(org, epoch, last, todo);
  }

  /** Turns rows (through `last`) into deliveries and stores them, unless the org changed hands meanwhile. */
  private async make(org: string, epoch: number, last: number, rows: readonly LedgerRow[]): Promise<void> {
    const planned = this.maker.plan(org, rows);
    const made: DeliveryRecord[] = [];
    for (let i = 0; i < planned.length; i += this.scope.ids.maxTake) {
      const part = planned.slice(i, i + this.scope.ids.maxTake);
      made.push(...this.maker.build(part, await this.scope.ids.take(org, part.length)));
    }
    if (this.epoch(org) !== epoch || !this.scope.owns(org)) return;
    this.writer.made(org, last, made);
    if (made.length > 0) await this.writer.flush();
  }
}
