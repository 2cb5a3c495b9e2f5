import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROTATION_OVERLAP_MS, WebhookRegistry, webhookView } from '../../src/services/webhook-registry.js';
import { openLmdb, type LmdbStores } from '../../src/store/lmdb.js';
import { removeDir, tempDir } from '../support/server.js';

/** The registry's bookkeeping for VIGIL_WEBHOOK_DISABLE_DAYS and rotation, on a real LMDB store (reopened to see what was stored). */
describe('WebhookRegistry', () => {
  const dir = tempDir('vigil-webhook-registry-');
  let stores: LmdbStores;
  // Near the real time: a view reads the rotation overlap against the wall clock.
  let clock = Math.floor(Date.now() / 3_600_000) * 3_600_000;
  const registry = (): WebhookRegistry =>
    new WebhookRegistry(stores.webhooks, { checkUrl: () => Promise.resolve(null), ledgerLength: () => 0, maxActive: () => ({ plan: 'test', limit: null }), now: () => clock });
  const IDLE = 60_000;

  beforeAll(() => {
    stores = openLmdb(dir);
  });
  afterAll(async () => {
    await stores.env.close();
    removeDir(dir);
  });

  it('marks a failing streak at its first failure, keeps it through failures, clears it on a delivery', async () => {
    const r = registry();
    const { id } = await r.create('acme', { url: 'https://receiver.example/a', events: ['gate.hold'], format: 'json' });
    const t0 = clock;
    expect((await r.attempted('acme', id, false, t0, IDLE))?.failing_since).toBe(new Date(t0).toISOString());
    expect((await r.attempted('acme', id, false, t0 + 10_000, IDLE))?.failing_since).toBe(new Date(t0).toISOString());
    // Past a quarter of the idle gap the last failure is written again, so a steady streak is never taken for an idle one.
    expect((await r.attempted('acme', id, false, t0 + 20_000, IDLE))?.last_failed_at).toBe(new Date(t0 + 20_000).toISOString());
    expect((await r.attempted('acme', id, false, t0 + 75_000, IDLE))?.failing_since).toBe(new Date(t0).toISOString());
    // Stored, not only held: a registry started again from the store sees the same.
    expect(registry().get('acme', id)).toMatchObject({ failing_since: new Date(t0).toISOString(), last_failed_at: new Date(t0 + 75_000).toISOString() });
    expect((await r.attempted('acme', id, true, t0 + 80_000, IDLE))?.failing_since).toBeNull();
    expect(registry().get('acme', id)?.failing_since).toBeNull();
  });

  it('starts the streak again after a failure-free gap longer than the idle time: a receiver nobody called was not failing', async () => {
    const r = registry();
    const { id } = await r.create('acme', { url: 'https://receiver.example/b', events: ['gate.hold'], format: 'json' });
    const t0 = clock;
    await r.attempted('acme', id, false, t0, IDLE);
    await r.attempted('acme', id, false, t0 + 5_000, IDLE);
    const later = t0 + 5_000 + IDLE + 1;
    expect((await r.attempted('acme', id, false, later, IDLE))?.failing_since).toBe(new Date(later).toISOString());
  });

  it('shows the rotation overlap while it lasts, null after, and drops the old secret with the next write', async () => {
    const r = registry();
    const created = await r.create('acme', { url: 'https://receiver.example/c', events: ['gate.hold'], format: 'json' });
    const rotated = await r.rotate('acme', created.id);
    expect(rotated).toMatchObject({ previous_secret: created.secret, previous_secret_until: new Date(clock + ROTATION_OVERLAP_MS).toISOString() });
    expect(webhookView(rotated).previous_secret_until).toBe(rotated.previous_secret_until);
    const expired = { ...rotated, previous_secret_until: new Date(Date.now() - 1).toISOString() };
    expect(webhookView(expired).previous_secret_until).toBeNull();
    clock += ROTATION_OVERLAP_MS + 1;
    const after = await r.attempted('acme', created.id, false, clock, IDLE);
    expect(after).toMatchObject({ previous_secret: null, previous_secret_until: null, secret: rotated.secret });
  });
});
