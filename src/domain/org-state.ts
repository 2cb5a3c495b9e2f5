import { agentFromRecord, type AgentView } from './agent-record.js';
import { applyReviewRecord } from './org-reviews.js';
import type { Policy } from './policy.js';
import type { AgentRecordBody, EventRecordBody, ExportRecordBody, LedgerRecord } from './records.js';
import type { ReviewOutcome } from './schemas.js';
import { copyState, FRESH_STATE, score, type Decision, type Gate, type ScoringState } from './scoring.js';

export type { AgentView, ExportRecordBody };

/**
 * What an org's single writer knows, and `evolve`, the one function that folds a record into it:
 * a replay folds every committed row with it, and the writer applies each record it decides with
 * it (org-decide.ts), so the two cannot drift.
 */
export interface AgentEntry {
  view: AgentView;
  scoring: ScoringState;
}

/** An action whose gate held it (hold, alert or collapse) and that awaits a reviewer's decision. */
export interface HeldAction {
  agentId: string;
  gate: Gate;
  /** null while pending, or `escalated` (still open). Entries are replaced, never changed. */
  outcome: ReviewOutcome | null;
  /** Its event was a risky signal (an incident), not a clean event held because the agent was. */
  risky: boolean;
}

export interface OrgState {
  agents: Map<string, AgentEntry>;
  nextEventId: number;
  /** Open held actions, by action id. */
  held: Map<number, HeldAction>;
  /** Actions released or rejected: closed for good (kept apart from `held` to stay compact). */
  closed: Set<number>;
  /** Events and exports recorded in `month` (UTC YYYY-MM of recorded_at), for the monthly quotas. */
  month: string;
  monthEvents: number;
  monthExports: number;
}

export function emptyOrgState(): OrgState {
  return { agents: new Map(), nextEventId: 1, held: new Map(), closed: new Set(), month: '', monthEvents: 0, monthExports: 0 };
}

export interface IngestResult extends Decision {
  event_id: number;
  action_id: number;
}

export interface ExportResult extends ExportRecordBody {
  seq: number;
  recorded_at: string;
  chain_hash: string;
}

/** Expected refusals are values, not exceptions. */
export type Refusal = {
  ok: false;
  code: 'not_found' | 'conflict' | 'idempotency_conflict' | 'overloaded' | 'unavailable' | 'plan_limit' | 'quota_exceeded' | 'internal' | 'ledger_damaged';
  message: string;
  /** For a monthly quota: seconds until the next UTC month. */
  retryAfterSeconds?: number;
};

/**
 * The org's plan limits that refuse (`block`) rather than bill, as the writer applies them; null
 * is no limit. Read once per batch.
 */
export interface WriterLimits {
  plan: string;
  eventsPerMonth: number | null;
  exportsPerMonth: number | null;
  agents: number | null;
  publicAgents: number | null;
  /** Seconds until the next UTC month (Retry-After of a monthly quota). */
  untilNextMonth: number;
}

export const NO_LIMITS: WriterLimits = { plan: 'none', eventsPerMonth: null, exportsPerMonth: null, agents: null, publicAgents: null, untilNextMonth: 0 };

/** Applies one record, committed or just decided, to the state. */
export function evolve(state: OrgState, record: LedgerRecord, policy: Policy): void {
  switch (record.kind) {
    case 'agent':
      applyAgentRecord(state, record.body, record.recordedAt);
      return;
    case 'event':
      applyEventRecord(state, record.agentId, record.body, policy, record.recordedAt);
      return;
    case 'review':
      applyReviewRecord(state, record.agentId, record.body);
      return;
    case 'export':
      countExport(state, record.recordedAt);
      return;
  }
}

/** An `agent` record: a registration (fresh scoring) or a change of the agent's facts. */
export function applyAgentRecord(state: OrgState, body: AgentRecordBody, recordedAt: string): void {
  const existing = state.agents.get(body.agent_id);
  const view = agentFromRecord(existing?.view, body, recordedAt);
  if (view === undefined) throw new Error(`ledger names an update of unknown agent ${body.agent_id}`);
  if (existing !== undefined && body.action === 'update') existing.view = view;
  else state.agents.set(body.agent_id, { view, scoring: copyState(FRESH_STATE) });
}

/**
 * An `event` record: scoring memory is recomputed with the current policy, but the recorded BII
 * and gate are authoritative (they are what the ledger says happened). An empty `recordedAt`
 * counts the event towards no month.
 */
export function applyEventRecord(state: OrgState, agentId: string, body: EventRecordBody, policy: Policy, recordedAt = ''): void {
  const eventId = body.event_id;
  if (recordedAt !== '') countEvent(state, recordedAt);
  if (eventId >= state.nextEventId) state.nextEventId = eventId + 1;
  const agent = state.agents.get(agentId);
  if (agent === undefined) return;
  const { state: next, risky } = score(policy, agent.scoring, {
    event_type: body.event_type,
    payload: body.payload,
    dti: body.dti,
    observed: body.observed,
  });
  next.bii = body.bii;
  next.gate = body.gate_status;
  agent.scoring = next;
  if (body.requires_human_review) state.held.set(eventId, { agentId, gate: next.gate, outcome: null, risky });
}

/** Counts an export recorded at `recordedAt` towards its month. */
export function countExport(state: OrgState, recordedAt: string): void {
  toMonth(state, recordedAt);
  state.monthExports++;
}

/** Counts an event recorded at `recordedAt` towards its month. */
function countEvent(state: OrgState, recordedAt: string): void {
  toMonth(state, recordedAt);
  state.monthEvents++;
}

/** Moves the month counters to the month of `recordedAt`. */
function toMonth(state: OrgState, recordedAt: string): void {
  const month = recordedAt.slice(0, 7);
  if (month === state.month) return;
  state.month = month;
  state.monthEvents = 0;
  state.monthExports = 0;
}

