import { afterEach, describe, expect, it } from 'vitest';
import { openLmdb } from '../../src/store/lmdb.js';
import type { DeliveryRecord } from '../../src/store/webhook-store.js';
import { removeDir, tempDir } from '../support/server.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) removeDir(dir);
});

function delivery(id: number, over: Partial<DeliveryRecord> = {}): DeliveryRecord {
  return {
    org: 'o',
    webhook_id: 1,
    id,
    event: 'gate.hold',
    envelope_id: `e${id}`,
    body: '{}',
    status: 'queued',
    attempts: 0,
    next_attempt_at: '2026-02-01T00:00:00.001Z',
    last_error: null,
    last_status: null,
    // The delivery actor's clock is past midnight; the ledger record that caused it is not.
    created_at: '2026-02-01T00:00:00.001Z',
    delivered_at: null,
    ledger_seq: id,
    ledger_recorded_at: '2026-01-31T23:59:59.999Z',
    ...over,
  };
}

describe('delivery usage counters', () => {
  it('count billed deliveries in the month of their ledger record, across updates and a reopen', async () => {
    const dir = tempDir('vigil-delivery-usage-');
    dirs.push(dir);
    let lmdb = openLmdb(dir);
    let store = lmdb.webhooks;
    await store.putDeliveries([delivery(1), delivery(2), delivery(3), delivery(4, { org: 'p' })]);
    expect(store.countDeliveries('o', '2026-01')).toBe(3);
    expect(store.countDeliveries('o', '2026-02')).toBe(0);
    expect(store.countDeliveries('p', '2026-01')).toBe(1);

    // 1 delivered (still billed, once); 2 cancelled before any attempt (not billed);
    // 3 attempted, then cancelled (billed).
    const attempted = delivery(3, { attempts: 1, last_status: 500 });
    await store.putDeliveries([delivery(1, { status: 'delivered', attempts: 1 }), delivery(2, { status: 'cancelled' }), attempted]);
    await store.putDeliveries([{ ...attempted, status: 'cancelled' }]);
    expect(store.countDeliveries('o', '2026-01')).toBe(2);
    // Writing the same state again changes nothing.
    await store.putDeliveries([delivery(2, { status: 'cancelled' }), { ...attempted, status: 'cancelled' }]);
    expect(store.countDeliveries('o', '2026-01')).toBe(2);

    await lmdb.close();
    lmdb = openLmdb(dir);
    store = lmdb.webhooks;
    expect(store.countDeliveries('o', '2026-01')).toBe(2);
    expect(store.countDeliveries('p', '2026-01')).toBe(1);
    await lmdb.close();
  });

  it('are seeded once from the deliveries of a data dir written before they existed', async () => {
    const dir = tempDir('vigil-delivery-usage-');
    dirs.push(dir);
    const lmdb = openLmdb(dir);
    const store = lmdb.webhooks;
    // An older row has no ledger_recorded_at: its creation month is used.
    const { ledger_recorded_at: _, ...legacy } = delivery(5);
    await store.putDeliveries([delivery(1), delivery(2, { status: 'cancelled' }), legacy]);
    const usage = lmdb.env.table<[string, string], number>('delivery_usage');
    await usage.clearAsync();
    expect(store.countDeliveries('o', '2026-01')).toBe(0);
    await lmdb.close();

    const reopened = openLmdb(dir);
    expect(reopened.webhooks.countDeliveries('o', '2026-01')).toBe(1);
    expect(reopened.webhooks.countDeliveries('o', '2026-02')).toBe(1);
    await reopened.close();
  });
});
