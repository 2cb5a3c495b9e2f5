import type { AgentRecordBody } from './records.js';

/**
 * Agent registry facts as the ledger records them. An `agent` record body is either a
 * registration `{agent_id, name, kind, observed}` or a change `{agent_id, action: "update",
 * changes: {...}}`; folding them in order gives the agent's current facts. The org writer and the
 * projections fold with this same function, so both always agree.
 */
export const LinkKind = ['website', 'code_host', 'social', 'agent_network', 'other'] as const;
export type LinkKind = (typeof LinkKind)[number];

export interface PublicLink {
  kind: LinkKind;
  url: string;
}

export interface AgentView {
  agent_id: string;
  name: string;
  kind: string;
  observed: boolean;
  is_active: boolean;
  public: boolean;
  public_links: PublicLink[];
  created_at: string;
  updated_at: string;
}

export interface AgentChanges {
  name?: string;
  kind?: string;
  observed?: boolean;
  is_active?: boolean;
  public?: boolean;
  public_links?: PublicLink[];
}

/** The agent's facts after an `agent` record; undefined for a change of an agent not registered. */
export function agentFromRecord(prev: AgentView | undefined, body: AgentRecordBody, recordedAt: string): AgentView | undefined {
  if (body.action === 'update') {
    if (prev === undefined) return undefined;
    const c = body.changes;
    // Field by field: a spread would give V8 a slow dictionary shape for an object read per event.
    return {
      agent_id: prev.agent_id,
      name: c.name ?? prev.name,
      kind: c.kind ?? prev.kind,
      observed: c.observed ?? prev.observed,
      is_active: c.is_active ?? prev.is_active,
      public: c.public ?? prev.public,
      public_links: c.public_links ?? prev.public_links,
      created_at: prev.created_at,
      updated_at: recordedAt,
    };
  }
  return {
    agent_id: body.agent_id,
    name: body.name,
    kind: body.kind,
    observed: body.observed,
    is_active: true,
    public: false,
    public_links: [],
    created_at: recordedAt,
    updated_at: recordedAt,
  };
}
