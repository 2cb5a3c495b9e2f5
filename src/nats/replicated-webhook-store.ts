import { JetStreamApiCodes, JetStreamApiError, type JetStreamClient } from '@nats-io/jetstream';
import { ensureError, VigilError } from '../errors.js';
import type { LmdbWebhookStore } from '../store/lmdb-webhook-store.js';
import type { DeliveriesWrite, DeliveryRecord, WebhookPut, WebhookRecord, WebhookStore } from '../store/webhook-store.js';
import { encodeWebhookMessage, webhookSubject, type DeliveriesMessage, type WebhookMessage, type WebhookStreamNames } from './webhook-stream.js';
import type { WebhookReplica } from './webhook-replica.js';

export interface ReplicatedWebhookStoreOptions {
  names: WebhookStreamNames;
  /** The server's max_payload: a write of one org larger than it goes as several messages. */
  maxPayload: number;
}

const STORED: WebhookPut = { ok: true };
const CONFLICT: WebhookPut = { ok: false, reason: 'conflict' };
/** Bytes kept free of deliveries in a message (msgpack framing, the cursor). */
const FRAMING = 1024;

/**
 * The WebhookStore of cluster mode (DESIGN §8): writes go to the `VIGIL_WEBHOOKS` stream and
 * resolve once the stream has them (replicated to a quorum) and this node's copy (WebhookReplica,
 * a local LmdbWebhookStore) has applied them; reads answer from that copy. So a write is readable
 * at once on the node that made it, and on every other node once its copy has caught up
 * (`caughtUp(org)`, which keyed reads await).
 *
 * Per org, one message per write: a webhook record on `<prefix>.<org>.config`, or the org's new
 * and changed deliveries with its cursor on `<prefix>.<org>.deliveries`, so each org's deliveries
 * and cursor land together (the invariant of DeliveryWriter). Every message presents the stream
 * sequence of the subject's last message as this node's copy has it
 * (Nats-Expected-Last-Subject-Sequence): a write made from an out-of-date view (another node
 * wrote the org's webhooks, or its deliveries, first) is refused by JetStream and stores nothing,
 * and the caller is told (`conflict`, `refused`) once this copy has caught up.
 *
 * Deliveries of one org too large for one message go as several, cut between ledger rows, each
 * with the cursor at its last row: each stores whole rows' deliveries, so the invariant holds
 * after any prefix of them lands.
 */
export class ReplicatedWebhookStore implements WebhookStore {
  constructor(
    private readonly js: JetStreamClient,
    private readonly replica: WebhookReplica,
    private readonly local: LmdbWebhookStore,
    private readonly options: ReplicatedWebhookStoreOptions,
  ) {}

  listAllWebhooks(): WebhookRecord[] {
    return this.local.listAllWebhooks();
  }

  async putWebhook(webhook: WebhookRecord): Promise<WebhookPut> {
    const subject = webhookSubject(this.options.names, { kind: 'config', org: webhook.org });
    const stored = await this.publish(subject, { v: 1, type: 'webhook', webhook });
    if (stored) return STORED;
    await this.replica.caughtUp(webhook.org);
    return CONFLICT;
  }

  async putDeliveries(deliveries: readonly DeliveryRecord[], cursors?: ReadonlyMap<string, number>): Promise<DeliveriesWrite> {
    const byOrg = new Map<string, DeliveryRecord[]>();
    for (const org of cursors?.keys() ?? []) byOrg.set(org, []);
    for (const d of deliveries) {
      const list = byOrg.get(d.org);
      if (list === undefined) byOrg.set(d.org, [d]);
      else list.push(d);
    }
    const outcomes = await Promise.allSettled([...byOrg].map(async ([org, records]) => ({ org, stored: await this.putOrg(org, records, cursors?.get(org)) })));
    const refused: string[] = [];
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') throw outcome.reason;
      if (!outcome.value.stored) refused.push(outcome.value.org);
    }
    return { refused };
  }

  getDelivery(org: string, webhookId: number, id: number): DeliveryRecord | undefined {
    return this.local.getDelivery(org, webhookId, id);
  }

  listDeliveries(org: string, webhookId: number, limit: number): DeliveryRecord[] {
    return this.local.listDeliveries(org, webhookId, limit);
  }

  queuedDeliveries(org?: string): DeliveryRecord[] {
    return this.local.queuedDeliveries(org);
  }

  countDeliveries(org: string, month: string): number {
    return this.local.countDeliveries(org, month);
  }

  lastDeliveryId(): number {
    return this.local.lastDeliveryId();
  }

  deliveryCursors(): Map<string, number> {
    return this.local.deliveryCursors();
  }

  watchWebhooks(listener: (webhook: WebhookRecord) => void): void {
    this.replica.watch(listener);
  }

  /** One org's part: its messages in turn; false once one is refused (what landed before it stays, whole rows each). */
  private async putOrg(org: string, records: readonly DeliveryRecord[], cursor: number | undefined): Promise<boolean> {
    const subject = webhookSubject(this.options.names, { kind: 'deliveries', org });
    for (const part of this.parts(org, records, cursor)) {
      if (!(await this.publish(subject, part))) {
        await this.replica.caughtUp(org);
        return false;
      }
    }
    return true;
  }

  /** The org's records as one message, or, over max_payload, several cut between ledger rows. */
  private parts(org: string, records: readonly DeliveryRecord[], cursor: number | undefined): DeliveriesMessage[] {
    const whole: DeliveriesMessage = { v: 1, type: 'deliveries', deliveries: [...records], cursor: cursor ?? null };
    const budget = this.options.maxPayload - FRAMING;
    if (encodeWebhookMessage(whole).length <= budget) return [whole];
    // Changed records (rows at or before the stored cursor) first, then new ones in row order.
    const sorted = [...records].sort((a, b) => a.ledger_seq - b.ledger_seq || a.id - b.id);
    const stored = this.replica.cursorOf(org);
    const parts: DeliveriesMessage[] = [];
    let part: DeliveryRecord[] = [];
    let size = 0;
    const close = (): void => {
      const top = part[part.length - 1]!.ledger_seq;
      parts.push({ v: 1, type: 'deliveries', deliveries: part, cursor: cursor !== undefined && top > stored ? Math.min(top, cursor) : null });
      part = [];
      size = 0;
    };
    for (const [i, d] of sorted.entries()) {
      const bytes = encodeWebhookMessage({ v: 1, type: 'deliveries', deliveries: [d], cursor: null }).length;
      // Cut only between rows: a row's deliveries always land together.
      if (part.length > 0 && size + bytes > budget && sorted[i - 1]!.ledger_seq !== d.ledger_seq) close();
      part.push(d);
      size += bytes;
    }
    if (part.length > 0) close();
    parts[parts.length - 1] = { ...parts[parts.length - 1]!, cursor: cursor ?? null };
    return parts;
  }

  /**
   * Publishes fenced on the subject's last message here and resolves once applied here: false when
   * refused by the fence (by JetStream, or by the replicas' own check of it), true when stored.
   */
  private async publish(subject: string, message: WebhookMessage): Promise<boolean> {
    const fence = this.replica.fence(subject);
    let seq: number;
    try {
      seq = (await this.js.publish(subject, encodeWebhookMessage(message), { expect: { lastSubjectSequence: fence } })).seq;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence) return false;
      // The stream did not answer (a server cut off, no leader): nothing was stored, try again.
      throw new VigilError('unavailable', `the webhook stream did not take the write: ${ensureError(error).message}; retry`, undefined, { retryAfterSeconds: 1, cause: error });
    }
    await this.replica.waitFor(seq);
    return !this.replica.refused(seq);
  }
}
