import type { Database, RootDatabase } from 'lmdb';
import type { LmdbEnv } from './lmdb-env.js';
import { deliveryMonth, isBilledDelivery, type DeliveriesWrite, type DeliveryRecord, type WebhookPut, type WebhookRecord, type WebhookStore } from './webhook-store.js';

const STORED: WebhookPut = { ok: true };
const ALL_STORED: DeliveriesWrite = { refused: [] };

/** [org, webhook id, delivery id] */
type DeliveryKey = [string, number, number];

/**
 * LMDB adapter of WebhookStore: the webhook and delivery tables of the environment. Every write is
 * one transaction and waits for the environment's durability.
 */
export class LmdbWebhookStore implements WebhookStore {
  private root!: RootDatabase;
  private webhooks!: Database<WebhookRecord, [string, number]>;
  private deliveries!: Database<DeliveryRecord, DeliveryKey>;
  /** The keys of queued deliveries only, so a start finds them without reading every delivery. */
  private deliveryQueue!: Database<number, DeliveryKey>;
  private deliveryCursorsDb!: Database<number, string>;
  /**
   * Billed deliveries per [org, month]. Kept here, in the transaction that writes the deliveries,
   * rather than in the usage meter: whether a delivery exists depends on which webhooks were active
   * and subscribed when its record committed, and whether it is billed on whether it was cancelled
   * before an attempt; neither is in the ledger, so a meter rebuilt from the ledger could not tell.
   */
  private deliveryUsage!: Database<number, [string, string]>;

  constructor(private readonly env: LmdbEnv) {
    env.attach((root) => {
      this.root = root;
      this.webhooks = root.openDB<WebhookRecord, [string, number]>({ name: 'webhooks' });
      this.deliveries = root.openDB<DeliveryRecord, DeliveryKey>({ name: 'deliveries' });
      this.deliveryQueue = root.openDB<number, DeliveryKey>({ name: 'delivery_queue' });
      this.deliveryCursorsDb = root.openDB<number, string>({ name: 'delivery_cursors' });
      this.deliveryUsage = root.openDB<number, [string, string]>({ name: 'delivery_usage' });
    });
    if (!env.readOnly) this.seedDeliveryUsage();
  }

  /**
   * A data dir written before delivery_usage existed has deliveries and no counters: count them
   * once. Every month with a delivery gets a key (0 included), so this never runs twice.
   */
  private seedDeliveryUsage(): void {
    if (this.deliveryUsage.getKeysCount() > 0 || this.deliveries.getKeysCount() === 0) return;
    const counts = new Map<string, number>();
    for (const { value: d } of this.deliveries.getRange({})) {
      const key = `${d.org}\u0000${deliveryMonth(d)}`;
      counts.set(key, (counts.get(key) ?? 0) + Number(isBilledDelivery(d)));
    }
    this.root.transactionSync(() => {
      for (const [key, n] of counts) this.deliveryUsage.putSync(key.split('\u0000') as [string, string], n);
    });
  }

  listAllWebhooks(): WebhookRecord[] {
    return [...this.webhooks.getRange({}).map(({ value }) => value)];
  }

  /** Never a conflict: the one process serving the data dir is its only writer (WebhookRegistry picks ids). */
  async putWebhook(webhook: WebhookRecord): Promise<WebhookPut> {
    await this.env.write(() => this.webhooks.put([webhook.org, webhook.id], webhook));
    await this.env.flushed();
    return STORED;
  }

  async putDeliveries(deliveries: readonly DeliveryRecord[], cursors?: ReadonlyMap<string, number>): Promise<DeliveriesWrite> {
    await this.env.write(() => this.root.transaction(() => {
      for (const d of deliveries) {
        const key: DeliveryKey = [d.org, d.webhook_id, d.id];
        // Read in the write transaction, so the counter moves exactly when billability does.
        const before = this.deliveries.get(key);
        const delta = Number(isBilledDelivery(d)) - (before === undefined ? 0 : Number(isBilledDelivery(before)));
        const usage: [string, string] = [d.org, deliveryMonth(d)];
        if (delta !== 0 || before === undefined) void this.deliveryUsage.put(usage, (this.deliveryUsage.get(usage) ?? 0) + delta);
        void this.deliveries.put(key, d);
        if (d.status === 'queued') void this.deliveryQueue.put(key, 1);
        else void this.deliveryQueue.remove(key);
      }
      if (cursors !== undefined) for (const [org, seq] of cursors) void this.deliveryCursorsDb.put(org, seq);
    }));
    await this.env.flushed();
    return ALL_STORED;
  }

  getDelivery(org: string, webhookId: number, id: number): DeliveryRecord | undefined {
    return this.deliveries.get([org, webhookId, id]);
  }

  listDeliveries(org: string, webhookId: number, limit: number): DeliveryRecord[] {
    const range = this.deliveries.getRange({ start: [org, webhookId, Infinity], end: [org, webhookId, 0], reverse: true, limit });
    return [...range.map(({ value }) => value)];
  }

  queuedDeliveries(org?: string): DeliveryRecord[] {
    const out: DeliveryRecord[] = [];
    for (const key of this.deliveryQueue.getKeys(org === undefined ? {} : { start: [org], end: [org, Infinity] })) {
      const d = this.deliveries.get(key);
      if (d !== undefined) out.push(d);
    }
    return out;
  }

  countDeliveries(org: string, month: string): number {
    return this.deliveryUsage.get([org, month]) ?? 0;
  }

  lastDeliveryId(): number {
    let last = 0;
    for (const key of this.deliveries.getKeys({})) if (key[2] > last) last = key[2];
    return last;
  }

  /** The org's highest delivery id (0: none), from a scan of its deliveries' keys. */
  lastDeliveryIdOf(org: string): number {
    let last = 0;
    for (const key of this.deliveries.getKeys({ start: [org], end: [org, Infinity] })) if (key[2] > last) last = key[2];
    return last;
  }

  deliveryCursors(): Map<string, number> {
    return new Map(this.deliveryCursorsDb.getRange({}).map(({ key, value }) => [key, value] as [string, number]));
  }
}
