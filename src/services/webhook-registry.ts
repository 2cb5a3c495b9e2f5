import { randomBytes } from 'node:crypto';
import type { CreateWebhookBody } from '../domain/schemas.js';
import type { WebhookEvent } from '../domain/webhook.js';
import { VigilError } from '../errors.js';
import type { WebhookPut, WebhookRecord, WebhookStore } from '../store/webhook-store.js';

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
 *
 * Creates of one org run one at a time here, and a store shared with other nodes (cluster mode)
 * refuses a write made from a stale view of the org's webhooks (`conflict`): the create then takes
 * the next id, a deactivation looks again, so ids stay unique and without gaps when two nodes
 * create at once. Records the store reports (watchWebhooks: other nodes' writes, and this node's
 * as its copy stores them) replace the ones held here, so every node lists the same webhooks.
 */
export class WebhookRegistry {
  private readonly byOrg = new Map<string, WebhookRecord[]>();
  /** Per org, the tail of its creates (one at a time). */
  private readonly creating = new Map<string, Promise<unknown>>();
  /** The store has other writers (cluster mode) and reports every stored record. */
  private readonly shared: boolean;

  constructor(
    private readonly store: WebhookStore,
    private readonly options: WebhookRegistryOptions,
  ) {
    for (const w of store.listAllWebhooks()) this.listOf(w.org).push(w);
    for (const list of this.byOrg.values()) list.sort(byId);
    this.shared = store.watchWebhooks !== undefined;
    store.watchWebhooks?.((w) => this.upsert(w));
  }

  async create(org: string, body: CreateWebhookBody): Promise<WebhookRecord> {
    const problem = await this.options.checkUrl(body.url);
    if (problem !== null) throw new VigilError('validation_failed', problem, [{ path: 'url', message: problem }]);
    const run = (this.creating.get(org) ?? Promise.resolve()).then(() => this.createNow(org, body));
    const tail = run.catch(() => undefined);
    this.creating.set(org, tail);
    void tail.then(() => {
      if (this.creating.get(org) === tail) this.creating.delete(org);
    });
    return run;
  }

  private async createNow(org: string, body: CreateWebhookBody): Promise<WebhookRecord> {
    for (;;) {
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
      // Held alone, in memory first: listed (and subscribed) while its write is under way. A shared
      // store's watch brings it in once stored instead: until then its id may still go to another node.
      if (!this.shared) list.push(webhook);
      let put: WebhookPut;
      try {
        put = await this.store.putWebhook(webhook);
      } catch (error) {
        this.remove(webhook);
        throw error;
      }
      if (put.ok) return webhook;
      // Another node took this id first; the store has caught up with it, so the next try takes the next one.
      this.remove(webhook);
    }
  }

  list(org: string): readonly WebhookRecord[] {
    return this.byOrg.get(org) ?? [];
  }

  get(org: string, id: number): WebhookRecord | undefined {
    return this.byOrg.get(org)?.find((w) => w.id === id);
  }

  /** Orgs with at least one webhook, active or not. */
  orgs(): string[] {
    return [...this.byOrg].filter(([, list]) => list.length > 0).map(([org]) => org);
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
    for (;;) {
      const current = this.get(org, id);
      if (current === undefined) throw new VigilError('not_found', `webhook ${id} not found`);
      if (!current.active) return current;
      const next: WebhookRecord = { ...current, active: false, deactivated_at: new Date(this.options.now()).toISOString() };
      const put = await this.store.putWebhook(next);
      if (!put.ok) continue; // changed on another node meanwhile: look again
      this.upsert(next);
      return next;
    }
  }

  /** Holds `webhook` in place of the record with its id (kept in id order). */
  private upsert(webhook: WebhookRecord): void {
    const list = this.listOf(webhook.org);
    const i = list.findIndex((w) => w.id === webhook.id);
    if (i >= 0) list[i] = webhook;
    else {
      list.push(webhook);
      list.sort(byId);
    }
  }

  /** Drops a create whose write did not store it (unless a stored record took its place). */
  private remove(webhook: WebhookRecord): void {
    const list = this.listOf(webhook.org);
    const i = list.indexOf(webhook);
    if (i >= 0) list.splice(i, 1);
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

const byId = (a: WebhookRecord, b: WebhookRecord): number => a.id - b.id;
