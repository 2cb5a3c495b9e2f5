import { ensureError } from '../errors.js';
import type { DeliveryRecord, WebhookStore } from '../store/webhook-store.js';
import type { Logger } from '../log.js';

export interface DeliveryWriterOptions {
  /** Runs once records are durable, in write order: the actor schedules the queued ones. */
  onStored: (records: readonly DeliveryRecord[]) => void;
  /**
   * Shared stores (cluster mode): orgs whose part of a write another writer wrote ahead of, so
   * nothing of it was stored. What was held for them in that write is dropped (it was made from a
   * view that is out of date); the actor reloads them from the store.
   */
  onRefused?: (orgs: readonly string[]) => void;
  log: Logger;
  /** Backoff between rewrites after a failed write (ms). */
  retry?: { firstMs: number; maxMs: number };
}

/**
 * The durable side of the delivery actor: what is stored, and the per-org delivery cursor.
 *
 * Invariant: per org, the stored deliveries are exactly those of the ledger rows up to the stored
 * cursor. New deliveries are held per org until one write stores all of them with the cursor at
 * the last row seen, so a failed write leaves the cursor behind every row whose deliveries are not
 * stored (a restart makes them again) and a later write can never store a later row past them
 * (which a restart would make twice). Changed records (attempt outcomes, cancellations) are held
 * likewise. Whatever a write could not store stays held and goes with the next write; after a
 * failure a timer rewrites it with backoff, so a store that recovers gets it without a restart.
 *
 * Writes run one at a time in call order; what a write carries is taken when it runs, not when it
 * is asked for, so a cursor is never saved ahead of a write that then fails. `flush` never
 * rejects: the ledger rows are already durable, and failures are logged and retried.
 */
export class DeliveryWriter {
  /** Per org, the last ledger seq turned into deliveries (stored or held). */
  private readonly seen = new Map<string, number>();
  /** Per org, the cursor last stored. */
  private readonly saved: Map<string, number>;
  /** Per org, new deliveries not yet stored, in ledger order. */
  private readonly fresh = new Map<string, DeliveryRecord[]>();
  /** Changed deliveries not yet stored, newest version by id. */
  private readonly changed = new Map<number, DeliveryRecord>();
  /** Per org, how many times it was reset: a write that began before a reset of its org reports nothing of that org. */
  private readonly generations = new Map<string, number>();
  private tail: Promise<void> = Promise.resolve();
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs: number;
  private stopped = false;

  constructor(
    private readonly store: WebhookStore,
    private readonly options: DeliveryWriterOptions,
  ) {
    this.saved = store.deliveryCursors();
    this.retryMs = this.retry.firstMs;
  }

  /** Per org, the stored cursor: replay starts after it. Live: it moves as writes land. */
  cursors(): ReadonlyMap<string, number> {
    return this.saved;
  }

  /** The org's rows up to `seq` made these deliveries (perhaps none); they are stored by the next flush. */
  made(org: string, seq: number, deliveries: readonly DeliveryRecord[]): void {
    this.seen.set(org, seq);
    if (deliveries.length === 0) return;
    const held = this.fresh.get(org);
    if (held === undefined) this.fresh.set(org, [...deliveries]);
    else held.push(...deliveries);
  }

  /** The org's last ledger seq turned into deliveries (stored or held), if any. */
  seenOf(org: string): number | undefined {
    return this.seen.get(org);
  }

  /**
   * Drops what is held for the org and starts it again from `cursor`, the store's (cluster mode:
   * an org this node takes over, or gives up with `cursor` undefined). A write already under way
   * still lands.
   */
  reset(org: string, cursor: number | undefined): void {
    this.generations.set(org, (this.generations.get(org) ?? 0) + 1);
    this.fresh.delete(org);
    for (const [id, d] of this.changed) if (d.org === org) this.changed.delete(id);
    if (cursor === undefined) {
      this.seen.delete(org);
      this.saved.delete(org);
    } else {
      this.seen.set(org, cursor);
      this.saved.set(org, cursor);
    }
  }

  /** Whether a change of the delivery is held, not yet stored. */
  holds(id: number): boolean {
    return this.changed.has(id);
  }

  /** A stored delivery changed; the next flush stores the change. */
  changedRecord(record: DeliveryRecord): void {
    this.changed.set(record.id, record);
  }

  /**
   * Writes everything held, with the cursors of the orgs whose deliveries it carries, or, with
   * `allCursors`, of every org whose cursor moved (checkpoints). Settles once written or failed.
   */
  flush(allCursors = false): Promise<void> {
    this.tail = this.tail.then(() => this.write(allCursors));
    return this.tail;
  }

  /** Settles once every write asked for so far has run. */
  settled(): Promise<void> {
    return this.tail;
  }

  /** Stops rewriting after failures: what is still held is made again (new) or resent (changed) after a restart. */
  stop(): void {
    this.stopped = true;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  private get retry(): { firstMs: number; maxMs: number } {
    return this.options.retry ?? { firstMs: 100, maxMs: 30_000 };
  }

  private async write(allCursors: boolean): Promise<void> {
    const taken = [...this.fresh].map(([org, held]) => ({ org, held, count: held.length }));
    const updates = [...this.changed.values()];
    const cursors = new Map<string, number>();
    for (const { org } of taken) cursors.set(org, this.seen.get(org)!);
    if (allCursors) {
      for (const [org, seq] of this.seen) if ((this.saved.get(org) ?? 0) < seq) cursors.set(org, seq);
    }
    if (taken.length === 0 && updates.length === 0 && cursors.size === 0) return;
    const records = [...taken.flatMap(({ held, count }) => held.slice(0, count)), ...updates];
    const generations = new Map([...records.map((d) => d.org), ...cursors.keys()].map((org) => [org, this.generations.get(org) ?? 0]));
    let refused: ReadonlySet<string>;
    try {
      refused = new Set((await this.store.putDeliveries(records, cursors.size === 0 ? undefined : cursors)).refused);
    } catch (error) {
      this.options.log.error({
        err: ensureError(error),
        deliveries: records.length,
        retry_ms: this.retryMs,
      }, 'webhook deliveries could not be written; they are held and rewritten');
      this.scheduleRetry();
      return;
    }
    this.retryMs = this.retry.firstMs;
    // Rows seen while this write ran stay held for the next one.
    for (const { org, held, count } of taken) {
      held.splice(0, count);
      if (held.length === 0 && this.fresh.get(org) === held) this.fresh.delete(org);
    }
    for (const u of updates) if (this.changed.get(u.id) === u) this.changed.delete(u.id);
    // Orgs reset while this write ran (cluster mode: given up or taken over again) are the store's to tell about now.
    const current = (org: string): boolean => (this.generations.get(org) ?? 0) === generations.get(org);
    for (const [org, seq] of cursors) if (!refused.has(org) && current(org)) this.saved.set(org, seq);
    try {
      const stored = refused.size === 0 && this.generations.size === 0 ? records : records.filter((d) => !refused.has(d.org) && current(d.org));
      this.options.onStored(stored);
      const lost = [...refused].filter(current);
      if (lost.length > 0) this.options.onRefused?.(lost);
    } catch (error) {
      this.options.log.error({ err: ensureError(error) }, 'stored deliveries could not be scheduled');
    }
  }

  private scheduleRetry(): void {
    if (this.stopped || this.retryTimer !== null || (this.fresh.size === 0 && this.changed.size === 0)) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, this.retry.maxMs);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.flush();
    }, delay);
    this.retryTimer.unref();
  }
}
