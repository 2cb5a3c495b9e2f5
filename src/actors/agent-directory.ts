import type { ProjectionHandler } from './projection.js';
import { agentFromRecord, type AgentView } from '../domain/agent-record.js';
import { parseRecord } from '../domain/records.js';

/** What is known of an agent from committed ledger records. */
export interface AgentSummary extends AgentView {
  gate: string | null;
  bii: number | null;
  policy_digest: string | null;
  ledger_records: number;
  last_event_at: string | null;
}

export interface OrgSummary {
  agents: Map<string, AgentSummary>;
  /** The org's ledger head (hex) and length, as of the last committed row seen. */
  head: string | null;
  length: number;
}

export interface DirectorySnapshot {
  head: string | null;
  length: number;
  agents: AgentSummary[];
}

/**
 * Projection of every org's agents, fed only by committed rows from the bus (replayed on start).
 * Single-threaded: an update and a read never interleave. Reads never touch the store.
 */
export class AgentDirectory {
  private readonly orgs = new Map<string, OrgSummary>();
  private readonly listeners: ((org: string) => void)[] = [];

  readonly onCommitted: ProjectionHandler = (org, rows) => {
    let entry = this.orgs.get(org);
    if (entry === undefined) {
      entry = { agents: new Map(), head: null, length: 0 };
      this.orgs.set(org, entry);
    }
    for (const row of rows) {
      entry.length = row.seq;
      const record = parseRecord(row);
      if (record === null || record.agentId === null) continue;
      let agent = entry.agents.get(record.agentId);
      if (record.kind === 'agent') {
        const view = agentFromRecord(agent, record.body, record.recordedAt);
        if (view === undefined) continue;
        agent = agent === undefined ? summaryOf(view) : Object.assign(agent, view);
        entry.agents.set(record.agentId, agent);
      }
      if (agent === undefined) continue;
      agent.ledger_records++;
      if (record.kind === 'event') {
        const { gate_status, bii, policy_digest } = record.body;
        agent.gate = gate_status;
        agent.bii = bii;
        if (policy_digest !== undefined) agent.policy_digest = policy_digest;
        agent.last_event_at = record.recordedAt;
      } else if (record.kind === 'review') {
        // A release can lift a collapse: the record carries the agent's gate and BII after it
        // (bodies of the first version carry neither).
        const { gate_status, bii } = record.body;
        if (typeof gate_status === 'string') agent.gate = gate_status;
        if (typeof bii === 'number') agent.bii = bii;
      }
    }
    const last = rows[rows.length - 1];
    if (last !== undefined) entry.head = last.chainHash.toString('hex');
    for (const listener of this.listeners) listener(org);
  };

  /** Calls `listener` after each batch of an org's committed rows is applied (cluster mode's public publisher). */
  onChange(listener: (org: string) => void): void {
    this.listeners.push(listener);
  }

  /** The org's state as plain data, for a checkpoint. */
  snapshot(org: string): DirectorySnapshot | undefined {
    const entry = this.orgs.get(org);
    // Copied: the summaries are updated in place by later rows.
    return entry === undefined ? undefined : { head: entry.head, length: entry.length, agents: [...entry.agents.values()].map((a) => summaryOf(a, a)) };
  }

  restore(org: string, snapshot: DirectorySnapshot): void {
    this.orgs.set(org, { head: snapshot.head, length: snapshot.length, agents: new Map(snapshot.agents.map((a) => [a.agent_id, summaryOf(a, a)])) });
  }

  orgNames(): string[] {
    return [...this.orgs.keys()];
  }

  get(org: string, agentId: string): AgentSummary | undefined {
    return this.orgs.get(org)?.agents.get(agentId);
  }

  org(org: string): OrgSummary | undefined {
    return this.orgs.get(org);
  }
}

/**
 * A summary written out field by field: V8 gives an object built by spreading this many fields a
 * slow dictionary shape, which made replaying a large ledger ten times slower.
 */
function summaryOf(view: AgentView, scored?: AgentSummary): AgentSummary {
  return {
    agent_id: view.agent_id,
    name: view.name,
    kind: view.kind,
    observed: view.observed,
    is_active: view.is_active,
    public: view.public,
    public_links: view.public_links,
    created_at: view.created_at,
    updated_at: view.updated_at,
    gate: scored?.gate ?? null,
    bii: scored?.bii ?? null,
    policy_digest: scored?.policy_digest ?? null,
    ledger_records: scored?.ledger_records ?? 0,
    last_event_at: scored?.last_event_at ?? null,
  };
}

/** Joins directories rebuilt from disjoint sets of agents (a partitioned replay). */
export function mergeDirectories(parts: readonly DirectorySnapshot[], head: string | null, length: number): DirectorySnapshot {
  return { head, length, agents: parts.flatMap((p) => p.agents) };
}
