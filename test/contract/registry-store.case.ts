import { describe, expect, it } from 'vitest';
import { hashKey } from '../../src/domain/keys.js';
import { Registry } from '../../src/services/registry.js';
import type { KeyRecord, OrgRecord, RegistryStore } from '../../src/store/registry-store.js';
import { SEEN_WITHIN, withHarness, type StoreHarness } from './store-harness.js';

const org = (slug: string, over: Partial<OrgRecord> = {}): OrgRecord => ({ slug, created_at: '2026-11-01T00:00:00.000Z', plan: 'free', ...over });
const key = (text: string, over: Partial<KeyRecord> = {}): KeyRecord => ({
  id: `key_${text}`,
  hash: hashKey(text),
  org: 'acme',
  scopes: ['events:write', 'admin'],
  name: null,
  created_at: '2026-11-01T00:00:00.000Z',
  ...over,
});

/** The RegistryStore contract (src/store/registry-store.ts), run by every adapter. */
export function runRegistryStoreContract(name: string, make: () => Promise<StoreHarness<RegistryStore>>): void {
  const run = (body: (h: StoreHarness<RegistryStore>) => Promise<void>) => withHarness(make, body);

  describe(`RegistryStore contract: ${name}`, () => {
    it('starts empty', run(async ({ store }) => {
      expect(store.isEmpty()).toBe(true);
      expect(store.listOrgs()).toEqual([]);
      expect(store.getOrg('acme')).toBeUndefined();
      expect(store.getKey(hashKey('vgl_nobody'))).toBeUndefined();
    }));

    it('reads its own writes at once, and replaces an org whole (plan, billing e-mail)', run(async ({ store }) => {
      await store.putOrg(org('acme'));
      expect(store.getOrg('acme')).toEqual(org('acme'));
      expect(store.isEmpty()).toBe(false);
      await store.putOrg(org('acme', { plan: 'team', billing_email: 'billing@acme.example' }));
      expect(store.getOrg('acme')).toEqual(org('acme', { plan: 'team', billing_email: 'billing@acme.example' }));
      await store.putOrg(org('acme', { plan: 'scale', billing_email: null }));
      expect(store.getOrg('acme')).toEqual(org('acme', { plan: 'scale', billing_email: null }));
      expect(store.listOrgs()).toHaveLength(1);
    }));

    it('lists orgs by slug, and holds any slug text', run(async ({ store }) => {
      for (const slug of ['zeta', 'alpha', 'mid-1', 'Odd.Slug/ü:1 ']) await store.putOrg(org(slug));
      expect(store.listOrgs().map((o) => o.slug)).toEqual(['Odd.Slug/ü:1 ', 'alpha', 'mid-1', 'zeta']);
      expect(store.getOrg('Odd.Slug/ü:1 ')).toEqual(org('Odd.Slug/ü:1 '));
      expect(store.getOrg('Odd.Slug/ü:1')).toBeUndefined();
    }));

    it('keeps keys by hash, exactly as stored; a key alone makes the store not empty', run(async ({ store }) => {
      const record = key('vgl_one', { name: 'ci', scopes: ['review'] });
      await store.putKey(record);
      expect(store.isEmpty()).toBe(false);
      expect(store.getKey(record.hash)).toEqual(record);
      expect(Object.keys(store.getKey(record.hash)!).sort()).toEqual(['created_at', 'hash', 'id', 'name', 'org', 'scopes']);
      expect(store.getKey(hashKey('vgl_two'))).toBeUndefined();
    }));

    it('shows each store the other one’s writes: orgs, plan changes, keys', run(async (h) => {
      const other = await h.other();
      await h.store.putOrg(org('acme'));
      await expect.poll(() => other.getOrg('acme'), SEEN_WITHIN).toEqual(org('acme'));
      await other.putOrg(org('acme', { plan: 'team' }));
      await expect.poll(() => h.store.getOrg('acme')?.plan, SEEN_WITHIN).toBe('team');
      const record = key('vgl_shared');
      await other.putKey(record);
      await expect.poll(() => h.store.getKey(record.hash), SEEN_WITHIN).toEqual(record);
      expect(h.store.listOrgs()).toEqual([org('acme', { plan: 'team' })]);
    }));

    it('serves the Registry: a key made by one store authenticates on the other, and a plan set there applies here', run(async (h) => {
      const other = await h.other();
      const here = new Registry(h.store);
      const there = new Registry(other);
      await here.ensureOrg('acme');
      const created = await here.createKey('acme', ['admin'], 'ops');
      expect(here.authenticate(`Bearer ${created.key}`)).toMatchObject({ id: created.id, org: 'acme', scopes: ['admin'], name: 'ops' });
      await expect.poll(() => {
        try {
          return there.authenticate(`Bearer ${created.key}`).id;
        } catch {
          return null;
        }
      }, SEEN_WITHIN).toBe(created.id);
      await expect.poll(() => there.getOrg('acme')?.slug, SEEN_WITHIN).toBe('acme');
      expect(await there.setPlan('acme', 'scale', 'ap@acme.example')).toMatchObject({ org: { plan: 'scale', billing_email: 'ap@acme.example' }, previousPlan: 'free' });
      await expect.poll(() => here.planOf('acme').name, SEEN_WITHIN).toBe('scale');
      expect(here.getOrg('acme')?.billing_email).toBe('ap@acme.example');
      // An org the plan is set for before it exists is created on that plan.
      expect(await there.setPlan('newco', 'team')).toMatchObject({ org: { slug: 'newco', plan: 'team' }, previousPlan: null });
      await expect.poll(() => here.getOrg('newco')?.plan, SEEN_WITHIN).toBe('team');
    }));

    it('serves revocation: a key revoked through one store is refused by a Registry on the other, which had already used it', run(async (h) => {
      const other = await h.other();
      const here = new Registry(h.store);
      const there = new Registry(other);
      await here.ensureOrg('acme');
      const created = await here.createKey('acme', ['events:write'], null);
      const kept = await here.createKey('acme', ['events:write'], null);
      const authenticates = (registry: Registry, text: string): string => {
        try {
          return registry.authenticate(`Bearer ${text}`).id;
        } catch (error) {
          return (error as Error).message;
        }
      };
      await expect.poll(() => authenticates(there, created.key), SEEN_WITHIN).toBe(created.id);
      const revoked = await here.revokeKey(created.id);
      expect(revoked).toMatchObject({ id: created.id, revoked_at: expect.any(String) });
      expect(authenticates(here, created.key)).toBe('this API key was revoked');
      await expect.poll(() => authenticates(there, created.key), SEEN_WITHIN).toBe('this API key was revoked');
      expect(authenticates(there, kept.key)).toBe(kept.id);
      expect(other.listKeys().map((k) => [k.id, k.revoked_at ?? null]).sort()).toEqual([[created.id, revoked.revoked_at], [kept.id, null]].sort());
      await expect(there.revokeKey('key_nope')).rejects.toThrow('key key_nope not found');
    }));
  });
}
