import { describe, expect, it } from 'vitest';
import { hashKey } from '../../src/domain/keys.js';
import type { ScoringKeyRecord, ScoringKeyStore, UseOutcome } from '../../src/record-scoring/key-store.js';
import { SEEN_WITHIN, withHarness, type StoreHarness } from './store-harness.js';

const key = (text: string, email: string, limit = 100): ScoringKeyRecord => ({ hash: hashKey(text), email, limit, used: 0, created_at: '2026-11-01T00:00:00.000Z' });
const remaining = (outcomes: UseOutcome[]): number[] => outcomes.flatMap((o) => (o.ok ? [o.remaining] : [])).sort((a, b) => a - b);
const exhausted = (outcomes: UseOutcome[]): number => outcomes.filter((o) => !o.ok && o.reason === 'exhausted').length;

/** The ScoringKeyStore contract (src/record-scoring/key-store.ts), run by every adapter. */
export function runScoringKeyStoreContract(name: string, make: () => Promise<StoreHarness<ScoringKeyStore>>): void {
  const run = (body: (h: StoreHarness<ScoringKeyStore>) => Promise<void>) => withHarness(make, body);

  describe(`ScoringKeyStore contract: ${name}`, () => {
    it('stores a key under its hash and gives an address one key, even to concurrent issues', run(async ({ store }) => {
      const outcomes = await Promise.all(['h1', 'h2', 'h3'].map((h) => store.issue(key(h, 'one@example.com'))));
      expect(outcomes.filter((o) => o.ok)).toHaveLength(1);
      expect(outcomes.filter((o) => !o.ok && o.reason === 'email_taken')).toHaveLength(2);
      const stored = ['h1', 'h2', 'h3'].map((h) => store.get(hashKey(h))).filter((k) => k !== undefined);
      expect(stored).toHaveLength(1);
      expect(Object.keys(stored[0]!).sort()).toEqual(['created_at', 'email', 'hash', 'limit', 'used']);
      expect(stored[0]).toMatchObject({ email: 'one@example.com', limit: 100, used: 0 });
    }));

    it('takes uses atomically: of concurrent uses only the allowance succeeds, durably', run(async (h) => {
      const record = key('vsk_store-level', 'store@example.com', 3);
      expect(await h.store.issue(record)).toEqual({ ok: true });
      const outcomes = await Promise.all(Array.from({ length: 10 }, () => h.store.use(record.hash)));
      expect(remaining(outcomes)).toEqual([0, 1, 2]);
      expect(exhausted(outcomes)).toBe(7);
      expect(h.store.get(record.hash)?.used).toBe(3);
      expect(await h.store.use(hashKey('vsk_nobody'))).toEqual({ ok: false, reason: 'unknown_key' });
      const other = await h.other();
      await expect.poll(() => other.get(record.hash)?.used, SEEN_WITHIN).toBe(3);
      expect(await other.use(record.hash)).toEqual({ ok: false, reason: 'exhausted' });
    }));

    it('changes nothing when it refuses: a taken address, a spent key', run(async ({ store }) => {
      const first = key('vsk_first', 'taken@example.com', 1);
      expect(await store.issue(first)).toEqual({ ok: true });
      expect(await store.issue(key('vsk_second', 'taken@example.com'))).toEqual({ ok: false, reason: 'email_taken' });
      expect(store.get(hashKey('vsk_second'))).toBeUndefined();
      expect(store.get(first.hash)).toEqual(first);
      expect(await store.use(first.hash)).toEqual({ ok: true, used: 1, remaining: 0 });
      expect(await store.use(first.hash)).toEqual({ ok: false, reason: 'exhausted' });
      expect(store.get(first.hash)).toEqual({ ...first, used: 1 });
    }));

    it('gives an address one key across stores (processes or nodes), also to concurrent issues', run(async (h) => {
      const other = await h.other();
      expect(await h.store.issue(key('vsk_a', 'across@example.com'))).toEqual({ ok: true });
      expect(await other.issue(key('vsk_b', 'across@example.com'))).toEqual({ ok: false, reason: 'email_taken' });
      for (let i = 0; i < 5; i++) {
        const email = `race${i}@example.com`;
        const outcomes = await Promise.all([h.store.issue(key(`vsk_x${i}`, email)), other.issue(key(`vsk_y${i}`, email))]);
        expect(outcomes.filter((o) => o.ok), email).toHaveLength(1);
      }
    }));

    it('shares one allowance between stores: concurrent uses on both never pass the limit', run(async (h) => {
      const other = await h.other();
      const record = key('vsk_shared', 'shared@example.com', 5);
      expect(await h.store.issue(record)).toEqual({ ok: true });
      await expect.poll(() => other.get(record.hash), SEEN_WITHIN).toEqual(record);
      const outcomes = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? h.store : other).use(record.hash)));
      expect(remaining(outcomes)).toEqual([0, 1, 2, 3, 4]);
      expect(exhausted(outcomes)).toBe(7);
      await expect.poll(() => [h.store.get(record.hash)?.used, other.get(record.hash)?.used], SEEN_WITHIN).toEqual([5, 5]);
    }));
  });
}
