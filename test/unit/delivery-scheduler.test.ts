import { describe, expect, it } from 'vitest';
import { DeliveryScheduler, type AttemptOutcome, type DeliveryBounds } from '../../src/actors/delivery-scheduler.js';
import type { DeliveryRecord } from '../../src/store/webhook-store.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const WIDE: DeliveryBounds = { total: 100, perOrg: 100, perWebhook: 100, slow: 100, slowPerOrg: 100 };
const POOL: DeliveryBounds = { total: 16, perOrg: 8, perWebhook: 2, slow: 4, slowPerOrg: 4 };

let ids = 0;
/** A queued delivery of `org`'s webhook `webhook`, due `dueMs` after T0. */
function delivery(org: string, webhook: number, dueMs = 0): DeliveryRecord {
  return record(org, webhook, ++ids, dueMs);
}

function record(org: string, webhook: number, id: number, dueMs = 0): DeliveryRecord {
  const at = new Date(T0 + dueMs).toISOString();
  return {
    org,
    webhook_id: webhook,
    id,
    event: 'gate.hold',
    envelope_id: `env-${id}`,
    body: '{}',
    status: 'queued',
    attempts: 0,
    next_attempt_at: at,
    last_error: null,
    last_status: null,
    created_at: at,
    delivered_at: null,
    ledger_seq: id,
  };
}

/** Takes until nothing may start; each taken delivery as `org/webhook`. */
function drain(s: DeliveryScheduler, now = T0): string[] {
  const taken: string[] = [];
  for (let d = s.take(now); d !== undefined; d = s.take(now)) taken.push(`${d.org}/${d.webhook_id}`);
  return taken;
}

let otherIds = 0;
/** Ends an attempt of each webhook (`org/webhook`) with `outcome`, on an otherwise empty scheduler. */
function paced(s: DeliveryScheduler, outcome: AttemptOutcome, webhooks: Iterable<string>): void {
  for (const w of webhooks) {
    const [org, webhook] = w.split('/');
    s.add(record(org!, Number(webhook), --otherIds));
    const d = s.take(T0);
    expect(d?.id).toBe(otherIds);
    s.release(d!, outcome);
  }
}

/** A scheduler holding `deliveries`, their webhooks healthy (their last attempt succeeded) unless told otherwise. */
function scheduler(bounds: DeliveryBounds, deliveries: DeliveryRecord[], pace: AttemptOutcome | 'unproven' = 'delivered'): DeliveryScheduler {
  const s = new DeliveryScheduler(bounds);
  if (pace !== 'unproven') paced(s, pace, new Set(deliveries.map((d) => `${d.org}/${d.webhook_id}`)));
  for (const d of deliveries) s.add(d);
  return s;
}

/** Attempts in flight by `org/webhook`. */
function counts(taken: readonly DeliveryRecord[]): Record<string, number> {
  const n: Record<string, number> = {};
  for (const d of taken) n[`${d.org}/${d.webhook_id}`] = (n[`${d.org}/${d.webhook_id}`] ?? 0) + 1;
  return n;
}

function takeAll(s: DeliveryScheduler, now = T0): DeliveryRecord[] {
  const taken: DeliveryRecord[] = [];
  for (let d = s.take(now); d !== undefined; d = s.take(now)) taken.push(d);
  return taken;
}

describe('DeliveryScheduler', () => {
  it('serves orgs round robin, however many deliveries each has waiting', () => {
    const s = scheduler(WIDE, [...Array.from({ length: 5 }, () => delivery('a', 1)), delivery('b', 1), delivery('b', 1), delivery('c', 1)]);
    expect(drain(s)).toEqual(['a/1', 'b/1', 'c/1', 'a/1', 'b/1', 'a/1', 'a/1', 'a/1']);
  });

  it('serves an org\'s webhooks round robin, each webhook\'s deliveries in due-time order, then in the order made', () => {
    const late = delivery('a', 1, 5);
    const first = delivery('a', 1, 1);
    const sameTimeA = delivery('a', 1, 2);
    const sameTimeB = delivery('a', 1, 2);
    const s = scheduler(WIDE, [late, sameTimeB, first, sameTimeA, delivery('a', 2, 3), delivery('a', 2, 4)]);
    const order: number[] = [];
    for (let d = s.take(T0 + 10); d !== undefined; d = s.take(T0 + 10)) order.push(d.id);
    expect(order).toEqual([first.id, ids - 1, sameTimeA.id, ids, sameTimeB.id, late.id]);
  });

  it('lets an org that gets due deliveries join at the back of the turns', () => {
    const more = scheduler(WIDE, [delivery('a', 1), delivery('a', 1), delivery('b', 1), delivery('b', 1)]);
    expect(more.take(T0)?.org).toBe('a');
    expect(more.take(T0)?.org).toBe('b');
    more.add(delivery('c', 1));
    expect(drain(more)).toEqual(['a/1', 'b/1', 'c/1']);
  });

  it('holds each webhook to its bound until a slot of it is released; the org\'s other webhooks go on', () => {
    const s = scheduler(POOL, [...Array.from({ length: 4 }, () => delivery('a', 1)), delivery('a', 2)]);
    const taken = [s.take(T0)!, s.take(T0)!, s.take(T0)!];
    expect(taken.map((d) => d.webhook_id)).toEqual([1, 2, 1]);
    expect(s.take(T0)).toBeUndefined();
    s.release(taken[1]!); // webhook 2's slot: nothing of webhook 1 may start
    expect(s.take(T0)).toBeUndefined();
    s.release(taken[0]!);
    expect(s.take(T0)?.webhook_id).toBe(1);
    expect(s.take(T0)).toBeUndefined();
    expect(s.size).toBe(1);
  });

  it('holds each org to its bound, so its slow webhooks leave the rest of the pool to the others', () => {
    const slow = Array.from({ length: 6 }, (_, i) => [delivery('a', i + 1), delivery('a', i + 1), delivery('a', i + 1)]).flat();
    const s = scheduler(POOL, slow);
    const taken = drain(s);
    expect(taken).toHaveLength(8);
    s.add(delivery('b', 1));
    s.add(delivery('b', 2));
    s.add(delivery('c', 1));
    expect(drain(s).sort()).toEqual(['b/1', 'b/2', 'c/1']);
  });

  it('starts at most `total` attempts in all, and gives a freed slot to the org whose turn it is', () => {
    const many = (org: string) => Array.from({ length: 6 }, (_, i) => delivery(org, i + 1));
    const s = scheduler(POOL, [...many('a'), ...many('a'), ...many('b'), ...many('b')]);
    const taken: DeliveryRecord[] = [];
    for (let d = s.take(T0); d !== undefined; d = s.take(T0)) taken.push(d);
    expect(taken).toHaveLength(16);
    s.add(delivery('c', 1));
    expect(s.take(T0)).toBeUndefined();
    // a and b were served last, c joined after them: a, then b, then c.
    s.release(taken.find((d) => d.org === 'a')!);
    expect(s.take(T0)?.org).toBe('a');
    s.release(taken.find((d) => d.org === 'b')!);
    expect(s.take(T0)?.org).toBe('b');
    s.release(taken.find((d) => d.org === 'a' && d.webhook_id === 2)!);
    expect(s.take(T0)?.org).toBe('c');
  });

  it('gives an unproven webhook one attempt at a time until one succeeds, then its full bound', () => {
    const s = scheduler(POOL, Array.from({ length: 6 }, () => delivery('a', 1)), 'unproven');
    const first = takeAll(s);
    expect(first).toHaveLength(1);
    s.release(first[0]!, 'delivered');
    expect(takeAll(s)).toHaveLength(POOL.perWebhook);
  });

  it('lets two orgs\' unproven silent webhooks take one slot each, leaving the pool to a third org and to their own others', () => {
    const silent = (org: string) => Array.from({ length: 4 }, (_, i) => Array.from({ length: 20 }, () => delivery(org, i + 1))).flat();
    const s = scheduler(POOL, [...silent('a'), ...silent('b'), delivery('a', 5), delivery('a', 5)], 'unproven');
    const taken = takeAll(s);
    expect(counts(taken)).toEqual({ 'a/1': 1, 'a/2': 1, 'a/3': 1, 'a/4': 1, 'a/5': 1, 'b/1': 1, 'b/2': 1, 'b/3': 1, 'b/4': 1 });
    s.add(delivery('c', 1));
    expect(takeAll(s).map((d) => `${d.org}/${d.webhook_id}`)).toEqual(['c/1']);
    s.release(taken.find((d) => d.webhook_id === 5)!, 'delivered');
    expect(takeAll(s).map((d) => `${d.org}/${d.webhook_id}`)).toEqual(['a/5']);
  });

  it('holds slow webhooks to one attempt each and to the slow lane, in all and per org; healthy ones take the rest', () => {
    const bounds: DeliveryBounds = { ...POOL, slow: 5, slowPerOrg: 3 };
    const slow = (org: string) => Array.from({ length: 6 }, (_, i) => [delivery(org, i + 1), delivery(org, i + 1)]).flat();
    const healthy = ['a/9', 'b/9', 'c/1'];
    const s = new DeliveryScheduler(bounds);
    paced(s, 'delivered', healthy);
    const all = [...slow('a'), ...slow('b')];
    paced(s, 'failed', new Set(all.map((d) => `${d.org}/${d.webhook_id}`)));
    for (const w of healthy) all.push(...Array.from({ length: 5 }, () => delivery(w[0]!, Number(w.slice(2)))));
    for (const d of all) s.add(d);
    const taken = takeAll(s);
    const n = counts(taken);
    const slowOf = (org: string) => taken.filter((d) => d.org === org && d.webhook_id !== 9).length;
    expect(slowOf('a') + slowOf('b')).toBe(bounds.slow);
    expect(Math.max(slowOf('a'), slowOf('b'))).toBe(bounds.slowPerOrg);
    for (const [w, k] of Object.entries(n)) expect(k, w).toBe(healthy.includes(w) ? POOL.perWebhook : 1);

    // A slow attempt's end frees a slot of the lane: another slow webhook's turn (the org's share permitting).
    const one = taken.find((d) => d.org === 'b' && d.webhook_id !== 9)!;
    s.release(one, 'failed');
    const next = takeAll(s);
    expect(next).toHaveLength(1);
    expect(next[0]!.webhook_id).not.toBe(9);
  });

  it('holds one org\'s slow webhooks to its share of the lane, leaving the rest of the lane to other orgs', () => {
    const bounds: DeliveryBounds = { ...POOL, slow: 5, slowPerOrg: 3 };
    const s = new DeliveryScheduler(bounds);
    paced(s, 'failed', ['a/1', 'a/2', 'a/3', 'a/4', 'a/5', 'a/6', 'b/1', 'b/2', 'b/3']);
    for (let w = 1; w <= 6; w++) s.add(delivery('a', w));
    expect(takeAll(s)).toHaveLength(bounds.slowPerOrg);
    for (let w = 1; w <= 3; w++) s.add(delivery('b', w));
    expect(takeAll(s).map((d) => d.org)).toEqual(['b', 'b']);
  });

  it('makes a slow webhook healthy again once an attempt of it succeeds, and one that fails slow', () => {
    const s = scheduler(POOL, Array.from({ length: 8 }, () => delivery('a', 1)), 'failed');
    const [first, ...none] = takeAll(s);
    expect(none).toEqual([]);
    s.release(first!, 'delivered');
    const healthy = takeAll(s);
    expect(healthy).toHaveLength(POOL.perWebhook);
    // One fails: slow again, its other attempt still out (counted where it started), so nothing starts.
    s.release(healthy[0]!, 'failed');
    expect(takeAll(s)).toEqual([]);
    s.release(healthy[1]!, 'failed');
    expect(takeAll(s)).toHaveLength(1);
  });

  it('keeps the pace when an attempt ends unsent, and forgets it with the webhook', () => {
    const bounds: DeliveryBounds = { ...POOL, slow: 1, slowPerOrg: 1 };
    const s = scheduler(bounds, [1, 2].flatMap((w) => Array.from({ length: 4 }, () => delivery('a', w))), 'failed');
    const [x, ...none] = takeAll(s);
    expect(none).toEqual([]);
    s.release(x!); // not sent: its webhook is still slow, so only the other one may use the lane
    const [y, ...none2] = takeAll(s);
    expect(none2).toEqual([]);
    expect(y!.webhook_id).not.toBe(x!.webhook_id);
    s.release(y!, 'delivered');
    s.dropWebhook('a', y!.webhook_id);
    for (let i = 0; i < 4; i++) s.add(delivery('a', y!.webhook_id));
    // Forgotten: unproven (one attempt), not healthy (two); the other, slow, takes the lane.
    expect(counts(takeAll(s))).toEqual({ 'a/1': 1, 'a/2': 1 });
  });

  it('gives nothing before its time, and says when to look again', () => {
    const d = delivery('a', 1, 1_000);
    const s = scheduler(WIDE, [d]);
    expect(s.take(T0)).toBeUndefined();
    expect(s.nextAt()).toBe(T0 + 1_000);
    expect(s.take(T0 + 1_000)).toBe(d);
    expect(s.nextAt()).toBeUndefined();
  });

  it('reschedules a delivery added again: only its latest time counts, and it is given once', () => {
    const d = delivery('a', 1, 0);
    const s = scheduler(WIDE, [d]);
    s.add({ ...d, next_attempt_at: new Date(T0 + 500).toISOString() });
    expect(s.take(T0)).toBeUndefined();
    expect(drain(s, T0 + 500)).toEqual(['a/1']);
    expect(s.size).toBe(0);
  });

  it('drops an org\'s or a webhook\'s waiting deliveries, due or not, and keeps nothing of them', () => {
    const s = scheduler(WIDE, [delivery('a', 1), delivery('a', 2), delivery('b', 1), ...Array.from({ length: 200 }, (_, i) => delivery('a', 3, 60_000 + i))]);
    const inFlight = s.take(T0)!;
    expect(inFlight.org).toBe('a');
    expect(s.dropWebhook('b', 1).map((d) => d.org)).toEqual(['b']);
    expect(s.dropOrg('a')).toHaveLength(201);
    expect(s.size).toBe(0);
    // The dropped deliveries' times are forgotten too: no timer for them.
    expect(s.nextAt()).toBeUndefined();
    expect(s.take(T0 + 120_000)).toBeUndefined();
    s.release(inFlight); // its slot is kept until its attempt ends
    expect(() => s.release(inFlight)).toThrow(/without an attempt in flight/);
  });
});
