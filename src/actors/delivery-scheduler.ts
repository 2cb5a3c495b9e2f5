import type { DeliveryRecord } from '../store/webhook-store.js';
import { DueQueue } from './due-queue.js';

/** How many attempts may be in flight at once. */
export interface DeliveryBounds {
  /** Across all orgs and webhooks: the process's pool. */
  total: number;
  /** Of one org, so that an org's slow receivers together cannot take the pool. */
  perOrg: number;
  /** To one webhook, so that one slow receiver cannot take its org's share. */
  perWebhook: number;
}

interface Held {
  d: DeliveryRecord;
  /** When its attempt is due (ms since the epoch). */
  at: number;
  /** Due and waiting in its webhook's turn (not in `later` any more). */
  due: boolean;
}

interface InFlight {
  n: number;
  /** By webhook id. */
  webhooks: Map<number, number>;
}

/**
 * Which queued delivery gets the next attempt: fair between orgs and between an org's webhooks.
 *
 * Deliveries wait in `later` until due; once due they move to their webhook's queue (due-time order,
 * then creation order). `take` serves the orgs with due deliveries round robin, and within an org
 * its webhooks round robin, skipping an org or webhook at its bound: an org or webhook that is
 * served goes to the back of the turns, one that gets due deliveries joins at the back, and one
 * skipped for its bound keeps its place. A slot is held from `take` until `release` (the attempt's
 * end: answer, error or the sender's timeout).
 *
 * Memory: the held deliveries and their entries (stale ones are dropped once they outnumber the
 * live), the orgs and webhooks with due deliveries, and counts for attempts in flight; nothing of
 * an org or webhook is kept once none of these names it. A `take` looks past at most the orgs and
 * webhooks at their bound (each has attempts in flight, so at most `total` of them).
 *
 * Pure: time is passed in; the caller keeps the timer (`nextAt`).
 */
export class DeliveryScheduler {
  private readonly held = new Map<number, Held>();
  private later = new DueQueue();
  /** Orgs with due deliveries, in turn order; each its webhooks with due deliveries, in turn order. */
  private readonly turns = new Map<string, Map<number, DueQueue>>();
  private readonly inFlight = new Map<string, InFlight>();
  private out = 0;

  constructor(private readonly bounds: DeliveryBounds) {}

  /** Deliveries waiting for an attempt (due or not). */
  get size(): number {
    return this.held.size;
  }

  get(id: number): DeliveryRecord | undefined {
    return this.held.get(id)?.d;
  }

  /** Schedules a queued delivery for its `next_attempt_at`; one held already is rescheduled. */
  add(d: DeliveryRecord): void {
    const at = Date.parse(d.next_attempt_at ?? d.created_at);
    this.held.set(d.id, { d, at, due: false });
    this.later.push(at, d.id);
    this.compact();
  }

  /** When the next delivery falls due, if any waits for its time (a stale time at worst: an early look). */
  nextAt(): number | undefined {
    return this.later.peek()?.at;
  }

  /** The next delivery to attempt now, its slot taken (see `release`); none if none may start. */
  take(now: number): DeliveryRecord | undefined {
    this.promote(now);
    if (this.out >= this.bounds.total) return undefined;
    for (const [org, webhooks] of this.turns) {
      const flight = this.inFlight.get(org);
      if ((flight?.n ?? 0) >= this.bounds.perOrg) continue;
      for (const [webhookId, queue] of webhooks) {
        if ((flight?.webhooks.get(webhookId) ?? 0) >= this.bounds.perWebhook) continue;
        const d = this.pop(queue);
        webhooks.delete(webhookId);
        if (d === undefined) continue; // nothing but stale entries
        // The served webhook, and its org, go to the back of the turns.
        if (queue.size > 0) webhooks.set(webhookId, queue);
        this.turns.delete(org);
        if (webhooks.size > 0) this.turns.set(org, webhooks);
        this.started(d);
        return d;
      }
      if (webhooks.size === 0) this.turns.delete(org);
    }
    return undefined;
  }

  /** The attempt of a taken delivery ended: its slot is free. */
  release(d: DeliveryRecord): void {
    const flight = this.inFlight.get(d.org);
    const n = flight?.webhooks.get(d.webhook_id);
    if (flight === undefined || n === undefined) throw new Error(`delivery ${d.id} released without an attempt in flight`);
    this.out--;
    if (--flight.n === 0) this.inFlight.delete(d.org);
    else if (n === 1) flight.webhooks.delete(d.webhook_id);
    else flight.webhooks.set(d.webhook_id, n - 1);
  }

  /** Forgets the org's waiting deliveries (returned); its attempts in flight keep their slots until released. */
  dropOrg(org: string): DeliveryRecord[] {
    this.turns.delete(org);
    return this.dropWhere((d) => d.org === org);
  }

  /** Forgets the webhook's waiting deliveries (returned). */
  dropWebhook(org: string, webhookId: number): DeliveryRecord[] {
    const webhooks = this.turns.get(org);
    webhooks?.delete(webhookId);
    if (webhooks?.size === 0) this.turns.delete(org);
    return this.dropWhere((d) => d.org === org && d.webhook_id === webhookId);
  }

  private dropWhere(which: (d: DeliveryRecord) => boolean): DeliveryRecord[] {
    const dropped: DeliveryRecord[] = [];
    for (const [id, h] of this.held) {
      if (!which(h.d)) continue;
      this.held.delete(id);
      dropped.push(h.d);
    }
    this.compact();
    return dropped;
  }

  /** Moves what fell due to the back of its webhook's queue; a webhook or org new to the turns joins at the back. */
  private promote(now: number): void {
    for (let top = this.later.peek(); top !== undefined && top.at <= now; top = this.later.peek()) {
      this.later.pop();
      const h = this.held.get(top.id);
      if (h === undefined || h.due || h.at !== top.at) continue; // stale
      h.due = true;
      let webhooks = this.turns.get(h.d.org);
      if (webhooks === undefined) this.turns.set(h.d.org, (webhooks = new Map<number, DueQueue>()));
      let queue = webhooks.get(h.d.webhook_id);
      if (queue === undefined) webhooks.set(h.d.webhook_id, (queue = new DueQueue()));
      queue.push(top.at, top.id);
    }
  }

  /** The queue's first live delivery, no longer held; stale entries on the way are dropped. */
  private pop(queue: DueQueue): DeliveryRecord | undefined {
    for (let top = queue.peek(); top !== undefined; top = queue.peek()) {
      queue.pop();
      const h = this.held.get(top.id);
      if (h === undefined || !h.due || h.at !== top.at) continue;
      this.held.delete(top.id);
      return h.d;
    }
    return undefined;
  }

  private started(d: DeliveryRecord): void {
    this.out++;
    let flight = this.inFlight.get(d.org);
    if (flight === undefined) this.inFlight.set(d.org, (flight = { n: 0, webhooks: new Map() }));
    flight.n++;
    flight.webhooks.set(d.webhook_id, (flight.webhooks.get(d.webhook_id) ?? 0) + 1);
  }

  /** Rebuilds `later` once its stale entries outnumber the live ones (drops and reschedules leave them). */
  private compact(): void {
    if (this.later.size <= 2 * this.held.size + 64) return;
    this.later = new DueQueue();
    for (const [id, h] of this.held) if (!h.due) this.later.push(h.at, id);
  }
}
