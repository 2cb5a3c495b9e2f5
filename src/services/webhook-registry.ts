import { randomBytes } from 'node:crypto';
import type { CreateWebhookBody } from '../domain/schemas.js';
import type { WebhookEvent } from '../domain/webhook.js';
import { VigilError } from '../errors.js';
import type { WebhookRecord, WebhookStore } from '../store/webhook-store.js';

/** What the API shows of a webhook: never the secret, except once in the create response. */
export interface WebhookView {
  id: number;
  url: string;
  events: WebhookEvent[];
  format: string;
  active: boolean;
  secret_hint: string;
  created_at: string;
}

export function webhookView(w: WebhookRecord): WebhookView {
  return { id: w.id, url: w.url, events: w.events, format: w.format, active: w.active, secret_hint: w.secret.slice(-8), created_at: w.created_at };
}

export interface WebhookRegistryOptions {
  /** null when the receiver URL may be used, else why not (SSRF rules). */
  checkUrl: (url: string) => Promise<string | null>;
  /** The org's committed ledger length: a new webhook gets deliveries for later records only. */
  ledgerLength: (org: string) => number;
  /** The org's plan limit on active webhooks (null: none), with the plan's name. */
  maxActive: (org: string) => { plan: string; limit: number | null };
  now: () => number;
}

/**
 * Every org's webhooks, held in memory (they are few) and written through to the store. Ids are
 * per org, from 1. Deactivation keeps the record.
 */
export class WebhookRegistry {
  private readonly byOrg = new Map<string, WebhookRecord[]>();

  constructor(
    private readonly store: WebhookStore,
    private readonly options: WebhookRegistryOptions,
  ) {
    for (const w of store.listAllWebhooks()) this.listOf(w.org).push(w);
  }

  async create(org: string, body: CreateWebhookBody): Promise<WebhookRecord> {
    const problem = await this.options.checkUrl(body.url);
    if (problem !== null) throw new VigilError('validation_failed', problem, [{ path: 'url', message: problem }]);
    const list = this.listOf(org);
    const { plan, limit } = this.options.maxActive(org);
    if (limit !== null && list.filter((w) => w.active).length >= limit) {
      throw new VigilError('plan_limit', `the ${plan} plan allows ${limit} active webhooks; deactivate one or upgrade the plan`);
    }
    const webhook: WebhookRecord = {
      org,
      id: (list.at(-1)?.id ?? 0) + 1,
      url: body.url,
      events: body.events,
      format: body.format,
      active: true,
      secret: 'whsec_' + randomBytes(32).toString('base64url'),
      created_at: new Date(this.options.now()).toISOString(),
      deactivated_at: null,
      after_seq: this.options.ledgerLength(org),
    };
    // In memory first, so a concurrent create takes the next id.
    list.push(webhook);
    try {
      await this.store.putWebhook(webhook);
    } catch (error) {
      list.splice(list.indexOf(webhook), 1);
      throw error;
    }
    return webhook;
  }

  list(org: string): readonly WebhookRecord[] {
    return this.byOrg.get(org) ?? [];
  }

  get(org: string, id: number): WebhookRecord | undefined {
    return this.byOrg.get(org)?.find((w) => w.id === id);
  }

  /** The org's active webhooks subscribed to `event` that are older than the record at `seq`. */
  subscribers(org: string, event: WebhookEvent, seq: number): WebhookRecord[] {
    return this.list(org).filter((w) => w.active && w.after_seq < seq && w.events.includes(event));
  }

  hasActive(org: string): boolean {
    return this.list(org).some((w) => w.active);
  }

  /** Deactivates (idempotent); the record stays. */
  async deactivate(org: string, id: number): Promise<WebhookRecord> {
    const list = this.listOf(org);
    const i = list.findIndex((w) => w.id === id);
    if (i < 0) throw new VigilError('not_found', `webhook ${id} not found`);
    const current = list[i]!;
    if (!current.active) return current;
    const next: WebhookRecord = { ...current, active: false, deactivated_at: new Date(this.options.now()).toISOString() };
    await this.store.putWebhook(next);
    list[i] = next;
    return next;
  }

  private listOf(org: string): WebhookRecord[] {
    let list = this.byOrg.get(org);
    if (list === undefined) {
      list = [];
      this.byOrg.set(org, list);
    }
    return list;
  }
}
