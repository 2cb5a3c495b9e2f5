/**
 * Studio agents (spec 2.9, demo mode): value types and the status lifecycle. Pure: no I/O, no
 * clock, no randomness (all passed in).
 */
export const StudioDomain = ['clinical', 'insurance', 'wellness', 'pharmacy', 'benefits'] as const;
export type StudioDomain = (typeof StudioDomain)[number];

export const RiskLevel = ['low', 'medium', 'high', 'restricted'] as const;
export type RiskLevel = (typeof RiskLevel)[number];

/**
 * draft → deployed ⇄ paused; any of them → retired, which is final. A studio agent answers chat
 * only while deployed.
 */
export const StudioStatus = ['draft', 'deployed', 'paused', 'retired'] as const;
export type StudioStatus = (typeof StudioStatus)[number];

const NEXT: Record<StudioStatus, readonly StudioStatus[]> = {
  draft: ['deployed', 'retired'],
  deployed: ['paused', 'retired'],
  paused: ['deployed', 'retired'],
  retired: [],
};

/** The spec 2.9 record, exactly as the routes answer it. */
export interface StudioAgent {
  id: number;
  agent_id: string;
  name: string;
  description: string | null;
  domain: string;
  risk_level: string;
  status: StudioStatus;
  persona: string | null;
  allowed_actions: string[];
  forbidden_actions: string[];
  deployed_at: string | null;
  deploy_endpoint: string | null;
  created_at: string;
  is_seed: boolean;
}

export type Transition =
  | { ok: true; agent: StudioAgent; changed: boolean }
  | { ok: false; code: 'conflict'; message: string };

/**
 * Moves an agent to `to`. Asking for the status it already has is a no-op (not an error);
 * entering `deployed` stamps `deployed_at` with `at` and sets the chat endpoint.
 */
export function transition(agent: StudioAgent, to: StudioStatus, at: string, baseUrl: string): Transition {
  if (agent.status === to) return { ok: true, agent, changed: false };
  if (!NEXT[agent.status].includes(to)) {
    const allowed = NEXT[agent.status];
    const hint = allowed.length === 0 ? 'retirement is final' : `from ${agent.status} it can go to ${allowed.join(' or ')}`;
    return { ok: false, code: 'conflict', message: `studio agent ${agent.agent_id} cannot go from ${agent.status} to ${to}: ${hint}` };
  }
  if (to !== 'deployed') return { ok: true, agent: { ...agent, status: to }, changed: true };
  return { ok: true, agent: { ...agent, status: to, deployed_at: at, deploy_endpoint: chatEndpoint(baseUrl, agent.agent_id) }, changed: true };
}

export function chatEndpoint(baseUrl: string, agentId: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/chat/${encodeURIComponent(agentId)}`;
}

/**
 * The agent_id of a created studio agent: a slug of the name (at most 40 characters, `agent`
 * when nothing is left) and a short suffix, e.g. `triage-helper-3f9a1c`.
 */
export function studioAgentId(name: string, suffix: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, 40)
    .replace(/^-+|-+$/g, '');
  return `${slug === '' ? 'agent' : slug}-${suffix}`;
}

/** The seed agents' ids: one per domain. */
export function seedAgentId(domain: StudioDomain): string {
  return `studio-${domain}`;
}
