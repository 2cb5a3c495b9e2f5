import { ensureError } from '../errors.js';
import type { Envelope } from '../domain/webhook.js';
import type { Logger } from '../log.js';
import type { WebhookRegistry } from '../services/webhook-registry.js';
import type { WebhookRecord } from '../store/webhook-store.js';
import { queuedDelivery } from './delivery-maker.js';
import type { DeliveryWriter } from './delivery-writer.js';

const DAY_MS = 86_400_000;

export interface WebhookHealthOptions {
  /** The retry schedule (seconds): a failure longer after the last one than its longest wait starts a new streak. */
  schedule: readonly number[];
  /** A webhook whose attempts have all failed for this many days is deactivated. */
  disableDays: number;
  now: () => number;
  newId: () => string;
  log: Logger;
}

/** What the delivery actor does for the webhook health: its queued deliveries, and ids for notices. */
export interface WebhookHealthActor {
  /** Cancels a deactivated webhook's queued deliveries. */
  cancel(webhook: WebhookRecord): Promise<void>;
  /** `count` fresh delivery ids of the org, the first returned. */
  newIds(org: string, count: number): Promise<number>;
}

/**
 * What an attempt's outcome does to its webhook: keeps its failing-since mark, and deactivates it
 * when its receiver is gone (410) or has failed every attempt for `disableDays`, cancelling what
 * waits for it and sending the org's other active webhooks a `webhook.disabled` notice.
 */
export class WebhookHealth {
  constructor(
    private readonly webhooks: WebhookRegistry,
    private readonly writer: DeliveryWriter,
    private readonly actor: WebhookHealthActor,
    private readonly options: WebhookHealthOptions,
  ) {}

  /** After an attempt made at `at`. A failed write of the mark is logged; the next attempt tries again. */
  async attempted(webhook: WebhookRecord, delivered: boolean, gone: boolean, at: number): Promise<void> {
    try {
      if (gone) return await this.disable(webhook, 'the receiver answered 410 Gone');
      // A failure longer after the last one than any retry waits (and a minute) starts a new streak.
      const idleMs = Math.max(...this.options.schedule) * 1000 + 60_000;
      const marked = await this.webhooks.attempted(webhook.org, webhook.id, delivered, at, idleMs);
      const since = marked?.failing_since ?? null;
      if (delivered || since === null || !marked!.active) return;
      if (this.options.now() - Date.parse(since) >= this.options.disableDays * DAY_MS) {
        await this.disable(marked!, `every attempt failed since ${since} (${this.options.disableDays} days or more)`);
      }
    } catch (error) {
      this.options.log.error({ org: webhook.org, webhook: webhook.id, err: ensureError(error) }, 'webhook state after an attempt could not be written');
    }
  }

  /** Deactivates the webhook (Vigil's decision, `reason`), cancels what waits for it and tells the org's other webhooks. */
  private async disable(webhook: WebhookRecord, reason: string): Promise<void> {
    const { webhook: disabled, changed } = await this.webhooks.deactivate(webhook.org, webhook.id, reason);
    if (!changed) return;
    this.options.log.warn({ org: webhook.org, webhook: webhook.id, reason }, 'webhook deactivated by Vigil');
    await this.actor.cancel(disabled);
    await this.notifyDisabled(disabled, reason);
  }

  /** Queues a `webhook.disabled` notice to each of the org's other active webhooks. */
  private async notifyDisabled(disabled: WebhookRecord, reason: string): Promise<void> {
    const others = this.webhooks.list(disabled.org).filter((w) => w.active && w.id !== disabled.id);
    if (others.length === 0) return;
    const now = new Date(this.options.now()).toISOString();
    const data = { webhook_id: disabled.id, host: new URL(disabled.url).host, reason, deactivated_at: disabled.deactivated_at };
    const first = await this.actor.newIds(disabled.org, others.length);
    others.forEach((w, i) => {
      const envelope: Envelope = { id: this.options.newId(), event: 'webhook.disabled', org: w.org, created_at: now, data };
      this.writer.changedRecord(queuedDelivery(w, first + i, envelope, now, 0));
    });
    await this.writer.flush();
  }
}
