import { describe, expect, it } from 'vitest';
import type { StudioAgent } from '../../src/demo/studio-agent.js';
import type { StudioAgentStore } from '../../src/demo/studio-store.js';
import { SEEN_WITHIN, withHarness, type StoreHarness } from './store-harness.js';

const agent = (id: number, agentId: string, over: Partial<StudioAgent> = {}): StudioAgent => ({
  id,
  agent_id: agentId,
  name: `Agent ${id}`,
  description: null,
  domain: 'clinical',
  risk_level: 'medium',
  status: 'draft',
  persona: null,
  allowed_actions: ['explain care plans'],
  forbidden_actions: [],
  deployed_at: null,
  deploy_endpoint: null,
  created_at: '2026-11-01T00:00:00.000Z',
  is_seed: false,
  ...over,
});

/** The StudioAgentStore contract (src/demo/studio-store.ts), run by every adapter. */
export function runStudioAgentStoreContract(name: string, make: () => Promise<StoreHarness<StudioAgentStore>>): void {
  const run = (body: (h: StoreHarness<StudioAgentStore>) => Promise<void>) => withHarness(make, body);

  describe(`StudioAgentStore contract: ${name}`, () => {
    it('starts empty', run(async ({ store }) => {
      expect(store.list('acme')).toEqual([]);
      expect(store.get('acme', 'studio-clinical')).toBeUndefined();
    }));

    it('reads its own writes at once, lists an org’s agents by id, and replaces an agent whole', run(async ({ store }) => {
      await store.put('acme', agent(3, 'c-000003'));
      await store.put('acme', agent(1, 'a-000001'));
      await store.put('acme', agent(2, 'b-000002'));
      expect(store.list('acme').map((a) => a.id)).toEqual([1, 2, 3]);
      expect(store.get('acme', 'b-000002')).toEqual(agent(2, 'b-000002'));
      const deployed = agent(2, 'b-000002', { status: 'deployed', deployed_at: '2026-11-02T00:00:00.000Z', deploy_endpoint: 'http://vigil.test/chat/b-000002' });
      await store.put('acme', deployed);
      expect(store.get('acme', 'b-000002')).toEqual(deployed);
      expect(store.list('acme')).toEqual([agent(1, 'a-000001'), deployed, agent(3, 'c-000003')]);
    }));

    it('keeps orgs apart, and agent_ids with dots and colons', run(async ({ store }) => {
      const odd = 'triage.helper:v2_3f9a1c';
      await store.put('acme', agent(1, odd));
      await store.put('globex', agent(1, 'other-000001'));
      expect(store.get('acme', odd)).toEqual(agent(1, odd));
      expect(store.get('globex', odd)).toBeUndefined();
      expect(store.get('acme', 'other-000001')).toBeUndefined();
      expect(store.list('acme').map((a) => a.agent_id)).toEqual([odd]);
      expect(store.list('globex').map((a) => a.agent_id)).toEqual(['other-000001']);
      expect(store.list('acm')).toEqual([]);
    }));

    it('shows another store (process or node) what was written', run(async (h) => {
      const other = await h.other();
      await h.store.put('acme', agent(1, 'seen-000001'));
      await expect.poll(() => other.get('acme', 'seen-000001'), SEEN_WITHIN).toEqual(agent(1, 'seen-000001'));
      await other.put('acme', agent(1, 'seen-000001', { status: 'retired' }));
      await expect.poll(() => h.store.list('acme').map((a) => a.status), SEEN_WITHIN).toEqual(['retired']);
    }));
  });
}
