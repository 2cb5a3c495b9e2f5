import type { AgentView, PublicLink } from './agent-record.js';

/** The reduced, public view of an agent (spec 2.1): exactly these fields, no event content. */
export interface PublicRecord {
  org: string;
  agent_id: string;
  name: string;
  kind: string;
  gate: string | null;
  bii: number | null;
  ledger_records: number;
  ledger_head: string | null;
  last_event_at: string | null;
  observed: boolean;
  policy_digest: string;
  public_links: PublicLink[];
  verify_url: string;
}

/** The facts a public record is made of: the agent's registry view and its scored state. */
export type PublicSource = Pick<AgentView, 'agent_id' | 'name' | 'kind' | 'observed' | 'is_active' | 'public' | 'public_links'> & {
  gate: string | null;
  bii: number | null;
  policy_digest: string | null;
  ledger_records: number;
  last_event_at: string | null;
};

export function isListed(agent: PublicSource): boolean {
  return agent.public && agent.is_active;
}

/**
 * Builds the public record. `policy_digest` before the first scored event is the digest of the
 * policy that will score it.
 */
export function toPublicRecord(
  org: string,
  agent: PublicSource,
  head: string | null,
  appUrl: string,
  currentPolicyDigest: string,
): PublicRecord {
  return {
    org,
    agent_id: agent.agent_id,
    name: agent.name,
    kind: agent.kind,
    gate: agent.gate,
    bii: agent.bii,
    ledger_records: agent.ledger_records,
    ledger_head: head,
    last_event_at: agent.last_event_at,
    observed: agent.observed,
    policy_digest: agent.policy_digest ?? currentPolicyDigest,
    public_links: agent.public_links.map((l) => ({ kind: l.kind, url: l.url })),
    verify_url: verifyUrl(appUrl, org, agent.agent_id),
  };
}

export function pageUrl(appUrl: string, org: string, agentId: string): string {
  return `${appUrl}/a/${encodeURIComponent(org)}/${encodeURIComponent(agentId)}`;
}

export function verifyUrl(appUrl: string, org: string, agentId: string): string {
  return `${pageUrl(appUrl, org, agentId)}/verify`;
}
