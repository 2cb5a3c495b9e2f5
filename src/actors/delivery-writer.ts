import { ensureError } from '../errors.js';
import type { DeliveryRecord, WebhookStore } from '../store/webhook-store.js';
import type { Logger } from '../log.js';

export interface DeliveryWriterOptions {
  /** Runs once records are durable, in write order: the actor schedules the queued ones. */
  onStored: (records: readonly DeliveryRecord[]) => void;
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
    try {
      await this.store.putDeliveries(records, cursors.size === 0 ? undefined : cursors);
    } catch (error) {
      this.options.log.error({
        error: ensureError(error).message,
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
      if (held.length === 0) this.fresh.delete(org);
    }
    for (const u of updates) if (this.changed.get(u.id) === u) this.changed.delete(u.id);
    for (const [org, seq] of cursors) this.saved.set(org, seq);
    try {
      this.options.onStored(records);
    } catch (error) {
      this.options.log.error({ error: ensureError(error).message }, 'stored deliveries could not be scheduled');
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
