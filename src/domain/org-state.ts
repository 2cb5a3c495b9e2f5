import { agentFromRecord, type AgentChanges, type AgentView } from './agent-record.js';
import { canonicalize } from './jcs.js';
import type { Policy } from './policy.js';
import type { IngestEventBody, RegisterAgentBody, ReviewOutcome } from './schemas.js';
import { copyState, FRESH_STATE, score, type Decision, type Gate, type ScoringState } from './scoring.js';

export type { AgentView };

export interface IngestResult extends Decision {
  event_id: number;
  action_id: number;
}

/** Expected refusals are values, not exceptions. */
export type Refusal = {
  ok: false;
  code: 'not_found' | 'conflict' | 'overloaded' | 'unavailable' | 'plan_limit' | 'quota_exceeded' | 'internal' | 'ledger_damaged';
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

/**
 * What an org's single writer knows, and the pure rules that turn commands into ledger record
 * bodies. The same `apply*` functions rebuild this state from the ledger on start.
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

/** Moves the month counters to the month of `recordedAt`. */
function toMonth(state: OrgState, recordedAt: string): void {
  const month = recordedAt.slice(0, 7);
  if (month === state.month) return;
  state.month = month;
  state.monthEvents = 0;
  state.monthExports = 0;
}

/** Counts an event recorded at `recordedAt` towards its month. */
function countEvent(state: OrgState, recordedAt: string): void {
  toMonth(state, recordedAt);
  state.monthEvents++;
}

/** Counts an export recorded at `recordedAt` towards its month. */
export function countExport(state: OrgState, recordedAt: string): void {
  toMonth(state, recordedAt);
  state.monthExports++;
}

function limitRefusal(what: string, limit: number, plan: string): Refusal {
  return { ok: false, code: 'plan_limit', message: `the ${plan} plan allows ${limit} ${what}; upgrade the plan to add more` };
}

export interface PlannedRecord<T> {
  kind: string;
  agentId: string | null;
  body: Record<string, unknown>;
  /** The body's JCS text, when the planner built it directly (the ingest hot path). */
  bodyJson?: string;
  result: T;
  /** When the answer needs the record's place in the chain: builds it from the row. */
  complete?: (row: { seq: number; recordedAt: string; chainHash: Buffer }) => T;
}

export type Planned<T> = PlannedRecord<T> | Refusal;

export function planRegister(state: OrgState, agent: RegisterAgentBody, recordedAt: string, limits: WriterLimits = NO_LIMITS): Planned<AgentView> {
  if (state.agents.has(agent.agent_id)) {
    return { ok: false, code: 'conflict', message: `agent ${agent.agent_id} is already registered` };
  }
  if (limits.agents !== null && countAgents(state, (v) => v.is_active) >= limits.agents) {
    return limitRefusal('active agents', limits.agents, limits.plan);
  }
  const body = { agent_id: agent.agent_id, name: agent.name, kind: agent.kind, observed: agent.observed };
  const view = applyAgentRecord(state, body, recordedAt);
  return { kind: 'agent', agentId: agent.agent_id, body, result: view };
}

/**
 * Plans an admin change. Retirement (`is_active: false`) is permanent: a retired agent takes no
 * further change.
 */
export function planUpdate(state: OrgState, agentId: string, changes: AgentChanges, recordedAt: string, limits: WriterLimits = NO_LIMITS): Planned<AgentView> {
  const agent = state.agents.get(agentId);
  if (agent === undefined) return { ok: false, code: 'not_found', message: `agent ${agentId} not found` };
  if (!agent.view.is_active) return { ok: false, code: 'conflict', message: `agent ${agentId} is retired; retirement is permanent` };
  const goesPublic = changes.public === true && !agent.view.public && changes.is_active !== false;
  if (goesPublic && limits.publicAgents !== null && countAgents(state, (v) => v.public && v.is_active) >= limits.publicAgents) {
    return limitRefusal('public agents', limits.publicAgents, limits.plan);
  }
  const body = { agent_id: agentId, action: 'update', changes };
  const view = applyAgentRecord(state, body, recordedAt);
  return { kind: 'agent', agentId, body, result: view };
}

/** Applies an `agent` record body (registration or change) to the state. */
export function applyAgentRecord(state: OrgState, body: Record<string, unknown>, recordedAt: string): AgentView {
  const id = String(body.agent_id);
  const existing = state.agents.get(id);
  const view = agentFromRecord(existing?.view, body, recordedAt);
  if (view === undefined) throw new Error(`ledger names an update of unknown agent ${id}`);
  if (existing !== undefined && body.action === 'update') existing.view = view;
  else state.agents.set(id, { view, scoring: copyState(FRESH_STATE) });
  return view;
}

function countAgents(state: OrgState, which: (view: AgentView) => boolean): number {
  let n = 0;
  for (const entry of state.agents.values()) if (which(entry.view)) n++;
  return n;
}

/** `recordedAt` (the batch's time) counts the event towards its month's quota. */
export function planIngest(
  state: OrgState,
  event: IngestEventBody,
  policy: Policy,
  digest: string,
  recordedAt = '',
  limits: WriterLimits = NO_LIMITS,
): Planned<IngestResult> {
  const agent = state.agents.get(event.agent_id);
  if (agent === undefined) return { ok: false, code: 'not_found', message: `agent ${event.agent_id} is not registered` };
  if (!agent.view.is_active) return { ok: false, code: 'conflict', message: `agent ${event.agent_id} is retired` };
  if (limits.eventsPerMonth !== null && state.month === recordedAt.slice(0, 7) && state.monthEvents >= limits.eventsPerMonth) {
    return {
      ok: false,
      code: 'quota_exceeded',
      message: `the ${limits.plan} plan allows ${limits.eventsPerMonth} events a month and this month's are used; upgrade the plan or wait for the next month (UTC)`,
      retryAfterSeconds: limits.untilNextMonth,
    };
  }
  // Encoded before any state changes: a payload that cannot be encoded refuses the command and
  // leaves the state as it was.
  const payloadJson = canonicalize(event.payload);
  if (recordedAt !== '') countEvent(state, recordedAt);
  const observed = agent.view.observed;
  const { decision, state: next, risky } = score(policy, agent.scoring, {
    event_type: event.event_type,
    payload: event.payload,
    dti: event.dti,
    observed,
  });
  agent.scoring = next;
  const id = state.nextEventId++;
  if (decision.requires_human_review) state.held.set(id, { agentId: event.agent_id, gate: decision.gate_status, outcome: null, risky });
  const body = {
    event_id: id,
    action_id: id,
    event_type: event.event_type,
    source: event.source,
    actor: event.actor,
    dti: event.dti,
    payload: event.payload,
    gate_status: decision.gate_status,
    bii: decision.bii,
    composite_trust: decision.composite_trust,
    reason: decision.reason,
    requires_human_review: decision.requires_human_review,
    policy_digest: digest,
    observed,
  };
  return {
    kind: 'event',
    agentId: event.agent_id,
    body,
    bodyJson: eventBodyJson(body, payloadJson),
    result: {
      event_id: id,
      action_id: id,
      gate_status: decision.gate_status,
      bii: decision.bii,
      composite_trust: decision.composite_trust,
      reason: decision.reason,
      requires_human_review: decision.requires_human_review,
    },
  };
}

type EventBody = {
  event_id: number;
  action_id: number;
  event_type: string;
  source: string;
  actor: string | null;
  dti: number | null;
  payload: Record<string, unknown>;
  gate_status: string;
  bii: number;
  composite_trust: number;
  reason: string;
  requires_human_review: boolean;
  policy_digest: string;
  observed: boolean;
};

const str = JSON.stringify;
const num = (n: number): string => canonicalize(n);

/**
 * JCS of an event body without sorting its keys at run time: the keys are written in their JCS
 * order. Equal to canonicalize(body) byte for byte (a property test holds it to that).
 */
export function eventBodyJson(b: EventBody, payloadJson = canonicalize(b.payload)): string {
  return (
    `{"action_id":${num(b.action_id)},"actor":${b.actor === null ? 'null' : str(b.actor)},"bii":${num(b.bii)},` +
    `"composite_trust":${num(b.composite_trust)},"dti":${b.dti === null ? 'null' : num(b.dti)},"event_id":${num(b.event_id)},` +
    `"event_type":${str(b.event_type)},"gate_status":${str(b.gate_status)},"observed":${b.observed},` +
    `"payload":${payloadJson},"policy_digest":${str(b.policy_digest)},"reason":${str(b.reason)},` +
    `"requires_human_review":${b.requires_human_review},"source":${str(b.source)}}`
  );
}

/**
 * Replays a committed `event` record: scoring memory is recomputed with the current policy, but
 * the recorded BII and gate are authoritative (they are what the ledger says happened).
 */
export function applyEventRecord(state: OrgState, agentId: string, body: Record<string, unknown>, policy: Policy, recordedAt = ''): void {
  const eventId = Number(body.event_id);
  if (recordedAt !== '') countEvent(state, recordedAt);
  if (eventId >= state.nextEventId) state.nextEventId = eventId + 1;
  const agent = state.agents.get(agentId);
  if (agent === undefined) return;
  const { state: next, risky } = score(policy, agent.scoring, {
    event_type: body.event_type as IngestEventBody['event_type'],
    payload: (body.payload ?? {}) as Record<string, unknown>,
    dti: typeof body.dti === 'number' ? body.dti : null,
    observed: body.observed !== false,
  });
  next.bii = Number(body.bii);
  next.gate = body.gate_status as Gate;
  agent.scoring = next;
  if (body.requires_human_review === true) state.held.set(eventId, { agentId, gate: next.gate, outcome: null, risky });
}

export interface ExportRecordBody {
  manifest_sha256: string;
  since_seq: number;
  until_seq: number;
  files: string[];
  agents: string[] | null;
}

export interface ExportResult extends ExportRecordBody {
  seq: number;
  recorded_at: string;
  chain_hash: string;
}

/** Plans the `export` record that says a bundle was made (the bundle itself is not stored). */
export function planExport(state: OrgState, body: ExportRecordBody, recordedAt: string, limits: WriterLimits = NO_LIMITS): Planned<ExportResult> {
  toMonth(state, recordedAt);
  if (limits.exportsPerMonth !== null && state.monthExports >= limits.exportsPerMonth) {
    return {
      ok: false,
      code: 'quota_exceeded',
      message: `the ${limits.plan} plan allows ${limits.exportsPerMonth} export bundles a month and this month's are used; upgrade the plan or wait for the next month (UTC)`,
      retryAfterSeconds: limits.untilNextMonth,
    };
  }
  state.monthExports++;
  const record = { manifest_sha256: body.manifest_sha256, since_seq: body.since_seq, until_seq: body.until_seq, files: body.files, agents: body.agents };
  return {
    kind: 'export',
    agentId: null,
    body: record,
    result: undefined as unknown as ExportResult,
    complete: (row) => ({ ...record, seq: row.seq, recorded_at: row.recordedAt, chain_hash: row.chainHash.toString('hex') }),
  };
}
