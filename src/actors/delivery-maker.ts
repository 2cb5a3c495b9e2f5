import type { LedgerRow } from '../domain/ledger.js';
import { parseRecord } from '../domain/records.js';
import { formatBody, webhookDataOf, webhookEventOf, type Envelope, type WebhookEvent } from '../domain/webhook.js';
import type { WebhookRegistry } from '../services/webhook-registry.js';
import type { DeliveryRecord, WebhookRecord } from '../store/webhook-store.js';

/** A delivery a row makes, before it has an id. */
export interface PlannedDelivery {
  webhook: WebhookRecord;
  event: WebhookEvent;
  row: LedgerRow;
  data: Record<string, unknown>;
}

export interface DeliveryMakerOptions {
  policyDigest: string;
  now: () => number;
  newId: () => string;
}

/** Turns committed gate and review rows into deliveries for the webhooks subscribed when each row committed. */
export class DeliveryMaker {
  constructor(
    private readonly webhooks: WebhookRegistry,
    private readonly options: DeliveryMakerOptions,
  ) {}

  /** The deliveries the org's rows make, in row order (none for an org without an active webhook). */
  plan(org: string, rows: Iterable<LedgerRow>): PlannedDelivery[] {
    const planned: PlannedDelivery[] = [];
    if (!this.webhooks.hasActive(org)) return planned;
    for (const row of rows) {
      const record = parseRecord(row);
      const event = record === null ? null : webhookEventOf(record);
      if (record === null || event === null) continue;
      const subscribers = this.webhooks.subscribers(org, event, row.seq);
      if (subscribers.length === 0) continue;
      // The envelope's data (spec 6.3): the gate decision, and for reviews the decision too.
      const data = webhookDataOf(record, row.seq, this.options.policyDigest);
      for (const webhook of subscribers) planned.push({ webhook, event, row, data });
    }
    return planned;
  }

  /** The planned deliveries as queued records, with ids from `firstId` on. */
  build(planned: readonly PlannedDelivery[], firstId: number): DeliveryRecord[] {
    const now = new Date(this.options.now()).toISOString();
    return planned.map(({ webhook, event, row, data }, i): DeliveryRecord => {
      const envelope: Envelope = { id: this.options.newId(), event, org: webhook.org, created_at: row.recordedAt, data };
      return { ...queuedDelivery(webhook, firstId + i, envelope, now, row.seq), ledger_recorded_at: row.recordedAt };
    });
  }
}

/** A new delivery of `envelope` to `webhook`, queued for an attempt now; `ledgerSeq`: the record that made it (0: none). */
export function queuedDelivery(webhook: WebhookRecord, id: number, envelope: Envelope, now: string, ledgerSeq: number): DeliveryRecord {
  return {
    org: webhook.org,
    webhook_id: webhook.id,
    id,
    event: envelope.event,
    envelope_id: envelope.id,
    body: formatBody(webhook.format, envelope),
    status: 'queued',
    attempts: 0,
    next_attempt_at: now,
    last_error: null,
    last_status: null,
    created_at: now,
    delivered_at: null,
    ledger_seq: ledgerSeq,
  };
}
