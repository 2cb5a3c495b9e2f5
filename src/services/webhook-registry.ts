import type { CreateWebhookBody } from '../domain/schemas.js';
import { newSecret, type WebhookEvent } from '../domain/webhook.js';
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
  /** Set while a rotated-out secret still signs beside the current one (24 h after the rotation). */
  previous_secret_until: string | null;
  /** Why Vigil deactivated it (a 410 Gone, or failing for VIGIL_WEBHOOK_DISABLE_DAYS); null otherwise. */
  disabled_reason: string | null;
}

export function webhookView(w: WebhookRecord): WebhookView {
  return {
    id: w.id,
    url: w.url,
    events: w.events,
    format: w.format,
    active: w.active,
    secret_hint: w.secret.slice(-8),
    created_at: w.created_at,
    previous_secret_until: overlapOf(w),
    disabled_reason: w.disabled_reason ?? null,
  };
}

/** Until when the rotated-out secret signs beside the current one; null once that has passed (or there is none). */
function overlapOf(w: WebhookRecord, now = Date.now()): string | null {
  const until = w.previous_secret_until ?? null;
  return until !== null && Date.parse(until) > now ? until : null;
}

/** How long a rotated-out secret keeps signing beside the new one. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000;

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
 * Writes of one org run one at a time here, and a store shared with other nodes (cluster mode)
 * refuses a write made from a stale view of the org's webhooks (`conflict`): the create then takes
 * the next id, a deactivation looks again, so ids stay unique and without gaps when two nodes
 * create at once. Records the store reports (watchWebhooks: other nodes' writes, and this node's
 * as its copy stores them) replace the ones held here, so every node lists the same webhooks.
 */
export class WebhookRegistry {
  private readonly byOrg = new Map<string, WebhookRecord[]>();
  /** Per org, the tail of its writes (one at a time, so no change is made from a view another one is replacing). */
  private readonly writing = new Map<string, Promise<unknown>>();
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
    return this.serially(org, () => this.createNow(org, body));
  }

  /** Runs `write` after the org's writes asked for before it. */
  private serially<T>(org: string, write: () => Promise<T>): Promise<T> {
    const run = (this.writing.get(org) ?? Promise.resolve()).then(write);
    const tail = run.catch(() => undefined);
    this.writing.set(org, tail);
    void tail.then(() => {
      if (this.writing.get(org) === tail) this.writing.delete(org);
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
        secret: newSecret(),
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

  /**
   * Deactivates (idempotent); the record stays. `reason`: Vigil deactivates it (a 410 Gone, or
   * failing too long), not its owner. `changed` says whether this call did it.
   */
  deactivate(org: string, id: number, reason: string | null = null): Promise<{ webhook: WebhookRecord; changed: boolean }> {
    return this.change(org, id, (current) =>
      current.active ? { ...current, active: false, deactivated_at: this.isoNow(), disabled_reason: reason } : null,
    );
  }

  /** A new secret; the current one keeps signing beside it for ROTATION_OVERLAP_MS (a rotation before that ends drops the older). */
  async rotate(org: string, id: number): Promise<WebhookRecord> {
    const { webhook } = await this.change(org, id, (current) => {
      if (!current.active) throw new VigilError('conflict', `webhook ${id} is deactivated`);
      const until = new Date(this.options.now() + ROTATION_OVERLAP_MS).toISOString();
      return { ...current, secret: newSecret(), previous_secret: current.secret, previous_secret_until: until };
    });
    return webhook;
  }

  /**
   * Records how the webhook's attempts go, for VIGIL_WEBHOOK_DISABLE_DAYS: `failing_since` is set
   * at the first failure after a delivered attempt (or none) and cleared by the next delivered
   * one. A failure more than `idleMs` after the last one recorded starts the streak again (a
   * receiver nobody called for days has not been failing all that time); `last_failed_at` is kept
   * within idleMs / 4 of the truth. Written on those turns only, not on every attempt.
   */
  attempted(org: string, id: number, delivered: boolean, at: number, idleMs: number): Promise<WebhookRecord | undefined> {
    const next = (w: WebhookRecord): WebhookRecord | null => {
      const since = w.failing_since ?? null;
      if (delivered) return since === null ? null : { ...w, failing_since: null, last_failed_at: null };
      const iso = new Date(at).toISOString();
      const last = w.last_failed_at === null || w.last_failed_at === undefined ? null : Date.parse(w.last_failed_at);
      if (since === null || last === null || at - last > idleMs) return { ...w, failing_since: iso, last_failed_at: iso };
      return at - last > idleMs / 4 ? { ...w, last_failed_at: iso } : null;
    };
    const current = this.get(org, id);
    if (current === undefined || next(current) === null) return Promise.resolve(current);
    return this.change(org, id, next).then(({ webhook }) => webhook);
  }

  /**
   * Stores `next(current)` in place of the webhook, one write of the org at a time; in a shared
   * store, again from the caught-up record when another node changed it meanwhile. `next` returns
   * null when there is nothing to change.
   */
  private change(org: string, id: number, next: (current: WebhookRecord) => WebhookRecord | null): Promise<{ webhook: WebhookRecord; changed: boolean }> {
    return this.serially(org, async () => {
      for (;;) {
        const current = this.get(org, id);
        if (current === undefined) throw new VigilError('not_found', `webhook ${id} not found`);
        let changed = next(current);
        if (changed === null) return { webhook: current, changed: false };
        // A rotated-out secret whose 24 hours are over is dropped with the next write.
        if (changed.previous_secret != null && overlapOf(changed, this.options.now()) === null) changed = { ...changed, previous_secret: null, previous_secret_until: null };
        const put = await this.store.putWebhook(changed);
        if (!put.ok) continue; // changed on another node meanwhile: look again
        // A shared store's watch has brought it in already, and perhaps a later record after it.
        if (!this.shared) this.upsert(changed);
        return { webhook: this.get(org, id) ?? changed, changed: true };
      }
    });
  }

  private isoNow(): string {
    return new Date(this.options.now()).toISOString();
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
