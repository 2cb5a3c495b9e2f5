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
  /** To slow webhooks together (the slow lane), so that the healthy always have slots. */
  slow: number;
  /** To one org's slow webhooks together, so that the org's healthy webhooks have slots. */
  slowPerOrg: number;
}

/** How an attempt ended, as far as pacing goes: a 2xx answer, or anything else (see `release`). */
export type AttemptOutcome = 'delivered' | 'failed';

interface Held {
  d: DeliveryRecord;
  /** When its attempt is due (ms since the epoch). */
  at: number;
  /** Due and waiting in its webhook's turn (not in `later` any more). */
  due: boolean;
}

interface InFlight {
  n: number;
  /** Of them, those started in the slow lane. */
  slow: number;
  /** By webhook id. */
  webhooks: Map<number, number>;
}

/**
 * What the last ended attempt to a webhook said. A webhook with none (new, or not attempted since
 * this process started sending for its org) is unproven: like a slow one it gets one attempt at a
 * time, but outside the slow lane, since a receiver is only known by trying it.
 */
type Pace = 'healthy' | 'slow';

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
 * The slow lane: a webhook whose last attempt failed is slow until one succeeds. A slow webhook
 * gets at most one attempt in flight, and slow webhooks' attempts together at most `slow`, at
 * most `slowPerOrg` of one org; a webhook whose last attempt succeeded gets `perWebhook`, and one
 * unproven (no attempt ended yet) one. Attempts count in the lane they started in.
 *
 * Memory: the held deliveries and their entries (stale ones are dropped once they outnumber the
 * live), the orgs and webhooks with due deliveries, counts for attempts in flight, and the pace of
 * each webhook whose attempt ended (dropped with its org or webhook). A `take` looks past the
 * orgs and webhooks at their bound (each has attempts in flight, so at most `total` of them) and,
 * while the slow lane or an org's share of it is full, the slow webhooks with due deliveries.
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
  /** Attempts in flight in the slow lane, in all and by delivery id. */
  private slowOut = 0;
  private readonly slowIds = new Set<number>();
  /** By org, then webhook id; a webhook absent is unproven. */
  private readonly paces = new Map<string, Map<number, Pace>>();

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
        const pace = this.paces.get(org)?.get(webhookId);
        const bound = pace === 'healthy' ? this.bounds.perWebhook : 1;
        if ((flight?.webhooks.get(webhookId) ?? 0) >= bound) continue;
        if (pace === 'slow' && (this.slowOut >= this.bounds.slow || (flight?.slow ?? 0) >= this.bounds.slowPerOrg)) continue;
        const d = this.pop(queue);
        webhooks.delete(webhookId);
        if (d === undefined) continue; // nothing but stale entries
        // The served webhook, and its org, go to the back of the turns.
        if (queue.size > 0) webhooks.set(webhookId, queue);
        this.turns.delete(org);
        if (webhooks.size > 0) this.turns.set(org, webhooks);
        this.started(d, pace === 'slow');
        return d;
      }
      if (webhooks.size === 0) this.turns.delete(org);
    }
    return undefined;
  }

  /**
   * The attempt of a taken delivery ended: its slot is free. `outcome`, when it was sent: a 2xx
   * makes its webhook healthy, anything else (timeout, connection error, any other status) slow.
   */
  release(d: DeliveryRecord, outcome?: AttemptOutcome): void {
    const flight = this.inFlight.get(d.org);
    const n = flight?.webhooks.get(d.webhook_id);
    if (flight === undefined || n === undefined) throw new Error(`delivery ${d.id} released without an attempt in flight`);
    this.out--;
    if (this.slowIds.delete(d.id)) {
      this.slowOut--;
      flight.slow--;
    }
    if (outcome !== undefined) this.paced(d.org, d.webhook_id, outcome === 'delivered' ? 'healthy' : 'slow');
    if (--flight.n === 0) this.inFlight.delete(d.org);
    else if (n === 1) flight.webhooks.delete(d.webhook_id);
    else flight.webhooks.set(d.webhook_id, n - 1);
  }

  /** Forgets the org's waiting deliveries (returned); its attempts in flight keep their slots until released. */
  dropOrg(org: string): DeliveryRecord[] {
    this.turns.delete(org);
    this.paces.delete(org);
    return this.dropWhere((d) => d.org === org);
  }

  /** Forgets the webhook's waiting deliveries (returned). */
  dropWebhook(org: string, webhookId: number): DeliveryRecord[] {
    const webhooks = this.turns.get(org);
    webhooks?.delete(webhookId);
    if (webhooks?.size === 0) this.turns.delete(org);
    const paces = this.paces.get(org);
    paces?.delete(webhookId);
    if (paces?.size === 0) this.paces.delete(org);
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

  private started(d: DeliveryRecord, slow: boolean): void {
    this.out++;
    let flight = this.inFlight.get(d.org);
    if (flight === undefined) this.inFlight.set(d.org, (flight = { n: 0, slow: 0, webhooks: new Map() }));
    flight.n++;
    if (slow) {
      this.slowOut++;
      flight.slow++;
      this.slowIds.add(d.id);
    }
    flight.webhooks.set(d.webhook_id, (flight.webhooks.get(d.webhook_id) ?? 0) + 1);
  }

  private paced(org: string, webhookId: number, pace: Pace): void {
    let paces = this.paces.get(org);
    if (paces === undefined) this.paces.set(org, (paces = new Map<number, Pace>()));
    paces.set(webhookId, pace);
  }

  /** Rebuilds `later` once its stale entries outnumber the live ones (drops and reschedules leave them). */
  private compact(): void {
    if (this.later.size <= 2 * this.held.size + 64) return;
    this.later = new DueQueue();
    for (const [id, h] of this.held) if (!h.due) this.later.push(h.at, id);
  }
}
