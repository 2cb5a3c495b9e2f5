import type { WebhookEvent, WebhookFormat } from '../domain/webhook.js';

/** A receiver registered by an org. The secret is kept: every delivery is signed with it. */
export interface WebhookRecord {
  org: string;
  /** Per org, from 1. */
  id: number;
  url: string;
  events: WebhookEvent[];
  format: WebhookFormat;
  active: boolean;
  secret: string;
  created_at: string;
  deactivated_at: string | null;
  /** The org's last ledger seq when it was created: only later records make deliveries. */
  after_seq: number;
  /** After a rotation, the secret it replaced: it signs beside `secret` until `previous_secret_until`. */
  previous_secret?: string | null;
  previous_secret_until?: string | null;
  /** When the attempts began failing with none delivered since (null: the last one was delivered). */
  failing_since?: string | null;
  /** The last failed attempt of that streak, as recorded (kept within a quarter of the idle gap that restarts it). */
  last_failed_at?: string | null;
  /** Why it was deactivated, when Vigil did it (a 410 Gone, or failing too long); null when its owner did. */
  disabled_reason?: string | null;
}

/** The secrets an attempt at `now` (ms) signs with: the current one, then a rotated-out one still in its 24 hours. */
export function signingSecrets(webhook: WebhookRecord, now: number): string[] {
  const until = webhook.previous_secret_until;
  const previous = webhook.previous_secret;
  if (previous === null || previous === undefined || until === null || until === undefined || Date.parse(until) <= now) return [webhook.secret];
  return [webhook.secret, previous];
}

export type DeliveryStatus = 'queued' | 'delivered' | 'dead' | 'cancelled';

export interface DeliveryRecord {
  org: string;
  webhook_id: number;
  /** Unique in the data dir, increasing. */
  id: number;
  event: WebhookEvent;
  /** The envelope id, sent as X-Vigil-Delivery on every attempt. */
  envelope_id: string;
  /** The exact request body; each attempt signs these bytes with a fresh timestamp. */
  body: string;
  status: DeliveryStatus;
  attempts: number;
  /** When queued, the next attempt; once final (delivered, dead, cancelled), the last attempt (or creation). */
  next_attempt_at: string;
  last_error: string | null;
  last_status: number | null;
  created_at: string;
  delivered_at: string | null;
  /** The ledger record that made it. */
  ledger_seq: number;
  /** That record's recorded_at: the delivery is billed in its UTC month (absent on older rows). */
  ledger_recorded_at?: string;
}

/**
 * Billed when made for an active webhook (webhook.disabled notices never are): a delivery cancelled before any attempt (its webhook
 * was deactivated while it waited) cost nothing, so it is not billed; one cancelled after an
 * attempt was made and stays billed.
 */
export function isBilledDelivery(d: DeliveryRecord): boolean {
  // A webhook.disabled notice is Vigil's own message about a receiver, not the org's traffic.
  if (d.event === 'webhook.disabled') return false;
  return d.status !== 'cancelled' || d.attempts > 0;
}

/** The UTC month (YYYY-MM) a delivery is billed in. */
export function deliveryMonth(d: DeliveryRecord): string {
  // Rows stored before ledger_recorded_at existed fall back to their creation time.
  return (d.ledger_recorded_at ?? d.created_at).slice(0, 7);
}

/**
 * What a webhook write did. `conflict`: another writer of a shared store (cluster mode) wrote the
 * org's webhooks first, so this write, made from an older view, stored nothing; the store's view
 * has caught up with that write by the time this is answered, so the caller decides again.
 */
export type WebhookPut = { ok: true } | { ok: false; reason: 'conflict' };

/**
 * What a deliveries write did: `refused` names the orgs whose part another writer of a shared
 * store (cluster mode: the org's previous or next owner) wrote ahead of, so nothing of it was
 * stored (their cursors did not move); the other orgs' parts are stored. Always empty where this
 * process is the store's only writer.
 */
export interface DeliveriesWrite {
  refused: readonly string[];
}

/**
 * Webhooks and their deliveries. Deliveries are written with the ledger position they cover
 * (per org, the delivery cursor) in one transaction, so after a crash the rows past the cursor
 * are turned into deliveries again and none is made twice. Writes resolve once durable (in a
 * shared store: once replicated and readable from this node's copy).
 */
export interface WebhookStore {
  listAllWebhooks(): WebhookRecord[];
  /** Stores a new or changed webhook, unless another writer wrote the org's webhooks first (a value, not a throw). */
  putWebhook(webhook: WebhookRecord): Promise<WebhookPut>;
  /**
   * Saves new or changed deliveries and, if given, delivery cursors: per org atomically (each org's
   * deliveries with its cursor), across orgs at once in LMDB.
   */
  putDeliveries(deliveries: readonly DeliveryRecord[], cursors?: ReadonlyMap<string, number>): Promise<DeliveriesWrite>;
  getDelivery(org: string, webhookId: number, id: number): DeliveryRecord | undefined;
  /** Newest first. */
  listDeliveries(org: string, webhookId: number, limit: number): DeliveryRecord[];
  /** Queued deliveries of every org, or of one. */
  queuedDeliveries(org?: string): DeliveryRecord[];
  /**
   * Billed deliveries (isBilledDelivery) of the org in a UTC month (deliveryMonth), for statements.
   * O(1): a counter kept in the transaction that writes the deliveries.
   */
  countDeliveries(org: string, month: string): number;
  lastDeliveryId(): number;
  deliveryCursors(): Map<string, number>;
  /**
   * Shared stores only: calls `listener` with every webhook record as this node's copy stores it
   * (this node's writes included), in the store's order, before the write that stored it resolves
   * on the node that made it. Listeners run in the order they were added.
   */
  watchWebhooks?(listener: (webhook: WebhookRecord) => void): void;
}
