import { describe, expect, it } from 'vitest';
import { DeliveryScheduler, type DeliveryBounds } from '../../src/actors/delivery-scheduler.js';
import type { DeliveryRecord } from '../../src/store/webhook-store.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const WIDE: DeliveryBounds = { total: 100, perOrg: 100, perWebhook: 100 };

let ids = 0;
/** A queued delivery of `org`'s webhook `webhook`, due `dueMs` after T0. */
function delivery(org: string, webhook: number, dueMs = 0): DeliveryRecord {
  const at = new Date(T0 + dueMs).toISOString();
  return {
    org,
    webhook_id: webhook,
    id: ++ids,
    event: 'gate.hold',
    envelope_id: `env-${ids}`,
    body: '{}',
    status: 'queued',
    attempts: 0,
    next_attempt_at: at,
    last_error: null,
    last_status: null,
    created_at: at,
    delivered_at: null,
    ledger_seq: ids,
  };
}

/** Takes until nothing may start; each taken delivery as `org/webhook`. */
function drain(s: DeliveryScheduler, now = T0): string[] {
  const taken: string[] = [];
  for (let d = s.take(now); d !== undefined; d = s.take(now)) taken.push(`${d.org}/${d.webhook_id}`);
  return taken;
}

function scheduler(bounds: DeliveryBounds, deliveries: DeliveryRecord[]): DeliveryScheduler {
  const s = new DeliveryScheduler(bounds);
  for (const d of deliveries) s.add(d);
  return s;
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
    const s = scheduler({ total: 16, perOrg: 8, perWebhook: 2 }, [...Array.from({ length: 4 }, () => delivery('a', 1)), delivery('a', 2)]);
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
    const s = scheduler({ total: 16, perOrg: 8, perWebhook: 2 }, slow);
    const taken = drain(s);
    expect(taken).toHaveLength(8);
    s.add(delivery('b', 1));
    s.add(delivery('b', 2));
    s.add(delivery('c', 1));
    expect(drain(s).sort()).toEqual(['b/1', 'b/2', 'c/1']);
  });

  it('starts at most `total` attempts in all, and gives a freed slot to the org whose turn it is', () => {
    const many = (org: string) => Array.from({ length: 6 }, (_, i) => delivery(org, i + 1));
    const s = scheduler({ total: 16, perOrg: 8, perWebhook: 2 }, [...many('a'), ...many('a'), ...many('b'), ...many('b')]);
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
