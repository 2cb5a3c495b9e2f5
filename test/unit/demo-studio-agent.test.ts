import { describe, expect, it } from 'vitest';
import { chatEndpoint, seedAgentId, studioAgentId, StudioStatus, transition, type StudioAgent } from '../../src/demo/studio-agent.js';
import { agentId } from '../../src/domain/schemas.js';

const agent = (status: StudioAgent['status']): StudioAgent => ({
  id: 1,
  agent_id: 'triage-abc123',
  name: 'Triage',
  description: null,
  domain: 'clinical',
  risk_level: 'medium',
  status,
  persona: null,
  allowed_actions: [],
  forbidden_actions: [],
  deployed_at: null,
  deploy_endpoint: null,
  created_at: '2025-01-01T00:00:00.000Z',
  is_seed: false,
});

const AT = '2025-02-03T04:05:06.789Z';
const BASE = 'https://vigil.example/';

describe('studio status lifecycle', () => {
  const legal: Record<string, string[]> = {
    draft: ['deployed', 'retired'],
    deployed: ['paused', 'retired'],
    paused: ['deployed', 'retired'],
    retired: [],
  };

  it('allows exactly draft → deployed ⇄ paused and any → retired; a same-status request is a no-op', () => {
    for (const from of StudioStatus) {
      for (const to of StudioStatus) {
        const t = transition(agent(from), to, AT, BASE);
        if (from === to) {
          expect(t).toEqual({ ok: true, agent: agent(from), changed: false });
        } else if (legal[from]!.includes(to)) {
          expect(t.ok && t.changed && t.agent.status === to).toBe(true);
        } else {
          expect(t.ok).toBe(false);
          if (!t.ok) expect(t.code).toBe('conflict');
        }
      }
    }
  });

  it('stamps deployed_at and the chat endpoint on entering deployed, and keeps them when paused', () => {
    const deployed = transition(agent('draft'), 'deployed', AT, BASE);
    expect(deployed.ok && deployed.agent).toMatchObject({ status: 'deployed', deployed_at: AT, deploy_endpoint: 'https://vigil.example/chat/triage-abc123' });
    if (!deployed.ok) return;
    const paused = transition(deployed.agent, 'paused', '2030-01-01T00:00:00.000Z', BASE);
    expect(paused.ok && paused.agent).toMatchObject({ status: 'paused', deployed_at: AT, deploy_endpoint: 'https://vigil.example/chat/triage-abc123' });
  });

  it('explains a refusal: retirement is final', () => {
    const t = transition(agent('retired'), 'deployed', AT, BASE);
    expect(t.ok).toBe(false);
    expect(!t.ok && t.message).toMatch(/retirement is final/);
    const d = transition(agent('draft'), 'paused', AT, BASE);
    expect(d.ok).toBe(false);
    expect(!d.ok && d.message).toMatch(/from draft it can go to deployed or retired/);
  });
});

describe('studio agent ids', () => {
  it('slugs the name and adds the suffix; the result is a valid agent_id', () => {
    expect(studioAgentId('Triage Helper', '3f9a1c')).toBe('triage-helper-3f9a1c');
    expect(studioAgentId('  Ça va? Déjà vu!  ', '000001')).toBe('ca-va-deja-vu-000001');
    expect(studioAgentId('!!!', 'abcdef')).toBe('agent-abcdef');
    const long = studioAgentId('x'.repeat(300), 'abcdef');
    expect(long).toBe(`${'x'.repeat(40)}-abcdef`);
    for (const id of [long, studioAgentId('日本語', 'a1b2c3'), seedAgentId('clinical')]) expect(agentId.safeParse(id).success).toBe(true);
    expect(seedAgentId('pharmacy')).toBe('studio-pharmacy');
  });

  it('builds the chat endpoint from the base URL without doubling slashes', () => {
    expect(chatEndpoint('http://127.0.0.1:8080', 'a')).toBe('http://127.0.0.1:8080/chat/a');
    expect(chatEndpoint('http://h/base//', 'a:b')).toBe('http://h/base/chat/a%3Ab');
  });
});
