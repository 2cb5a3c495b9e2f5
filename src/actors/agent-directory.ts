import type { CommittedHandler } from '../bus/bus.js';
import { rowBody } from '../domain/ledger.js';

/** What is known of an agent from committed ledger records. */
export interface AgentSummary {
  agent_id: string;
  name: string;
  kind: string;
  observed: boolean;
  is_active: boolean;
  gate: string | null;
  bii: number | null;
  policy_digest: string | null;
  ledger_records: number;
  last_event_at: string | null;
}

/**
 * Projection of agents per org, fed only by committed rows from the bus (replayed on start).
 * Single-threaded: updates and reads never interleave. Also tracks each org's head.
 */
export class AgentDirectory {
  private readonly orgs = new Map<string, { agents: Map<string, AgentSummary>; head: string | null; length: number }>();

  readonly onCommitted: CommittedHandler = (org, rows) => {
    let entry = this.orgs.get(org);
    if (entry === undefined) {
      entry = { agents: new Map(), head: null, length: 0 };
      this.orgs.set(org, entry);
    }
    for (const row of rows) {
      entry.length = row.seq;
      if (row.agentId === null) continue;
      let agent = entry.agents.get(row.agentId);
      if (row.kind === 'agent') {
        const body = rowBody(row);
        agent ??= {
          agent_id: row.agentId,
          name: '',
          kind: 'production',
          observed: true,
          is_active: true,
          gate: null,
          bii: null,
          policy_digest: null,
          ledger_records: 0,
          last_event_at: null,
        };
        if (typeof body.name === 'string') agent.name = body.name;
        if (typeof body.kind === 'string') agent.kind = body.kind;
        if (typeof body.observed === 'boolean') agent.observed = body.observed;
        if (body.is_active === false) agent.is_active = false;
        entry.agents.set(row.agentId, agent);
      }
      if (agent === undefined) continue;
      agent.ledger_records++;
      if (row.kind === 'event') {
        const body = rowBody(row);
        agent.gate = typeof body.gate_status === 'string' ? body.gate_status : agent.gate;
        agent.bii = typeof body.bii === 'number' ? body.bii : agent.bii;
        agent.policy_digest = typeof body.policy_digest === 'string' ? body.policy_digest : agent.policy_digest;
        agent.last_event_at = row.recordedAt;
      }
    }
    const last = rows[rows.length - 1];
    if (last !== undefined) entry.head = last.chainHash.toString('hex');
  };

  get(org: string, agentId: string): AgentSummary | undefined {
    return this.orgs.get(org)?.agents.get(agentId);
  }

  head(org: string): string | null {
    return this.orgs.get(org)?.head ?? null;
  }
}
