import type { AgentChanges, AgentView } from './agent-record.js';
import { canonicalize } from './jcs.js';
import { NO_LIMITS, type ExportResult, type IngestResult, type OrgState, type Refusal, type WriterLimits } from './org-state.js';
import type { ReviewResult } from './org-reviews.js';
import type { Policy } from './policy.js';
import { eventBodyJson, type AgentRecord, type EventRecord, type EventRecordBody, type ExportRecord, type ExportRecordBody, type ReviewRecord } from './records.js';
import type { IngestEventBody, RegisterAgentBody } from './schemas.js';
import { score } from './scoring.js';

/**
 * The org's rules, the decide half of its decider: each reads the state and returns the record it
 * decides, or a refusal, and changes nothing. The writer applies a decided record with `evolve`
 * (org-state.ts), the function a replay folds the same record with. Reviews' rules are in
 * org-reviews.ts.
 */

/** An event decided, its body's JCS text built directly (the hot path) and the gate decided. */
export type PlannedEvent = EventRecord & { bodyJson: string; result: IngestResult };
/** A review decided, and the decision as its caller is told it. */
export type PlannedReview = ReviewRecord & { result: ReviewResult };
/** A decided record: agent and export records carry no answer (see answerOf). */
export type Planned = AgentRecord | PlannedEvent | PlannedReview | ExportRecord;

export function planRegister(state: OrgState, agent: RegisterAgentBody, recordedAt: string, limits: WriterLimits = NO_LIMITS): AgentRecord | Refusal {
  if (state.agents.has(agent.agent_id)) {
    return { ok: false, code: 'conflict', message: `agent ${agent.agent_id} is already registered` };
  }
  if (limits.agents !== null && countAgents(state, (v) => v.is_active) >= limits.agents) {
    return limitRefusal('active agents', limits.agents, limits.plan);
  }
  const body = { agent_id: agent.agent_id, name: agent.name, kind: agent.kind, observed: agent.observed };
  return { kind: 'agent', recordedAt, agentId: agent.agent_id, body };
}

/**
 * Plans an admin change. Retirement (`is_active: false`) is permanent: a retired agent takes no
 * further change.
 */
export function planUpdate(state: OrgState, agentId: string, changes: AgentChanges, recordedAt: string, limits: WriterLimits = NO_LIMITS): AgentRecord | Refusal {
  const agent = state.agents.get(agentId);
  if (agent === undefined) return { ok: false, code: 'not_found', message: `agent ${agentId} not found` };
  if (!agent.view.is_active) return { ok: false, code: 'conflict', message: `agent ${agentId} is retired; retirement is permanent` };
  const goesPublic = changes.public === true && !agent.view.public && changes.is_active !== false;
  if (goesPublic && limits.publicAgents !== null && countAgents(state, (v) => v.public && v.is_active) >= limits.publicAgents) {
    return limitRefusal('public agents', limits.publicAgents, limits.plan);
  }
  return { kind: 'agent', recordedAt, agentId, body: { agent_id: agentId, action: 'update', changes } };
}

/**
 * Scores an event and decides its gate. `recordedAt` (the batch's time) places it in its month's
 * quota; empty, it counts towards none.
 */
export function planIngest(
  state: OrgState,
  event: IngestEventBody,
  policy: Policy,
  digest: string,
  recordedAt = '',
  limits: WriterLimits = NO_LIMITS,
): PlannedEvent | Refusal {
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
  // Throws for a payload that cannot be encoded: that command alone is refused.
  const payloadJson = canonicalize(event.payload);
  const observed = agent.view.observed;
  const { decision } = score(policy, agent.scoring, { event_type: event.event_type, payload: event.payload, dti: event.dti, observed });
  const id = state.nextEventId;
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
    ...(event.idempotency_key === undefined ? {} : { idempotency_key: event.idempotency_key }),
  } satisfies EventRecordBody;
  return {
    kind: 'event',
    recordedAt,
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

/** Plans the `export` record that says a bundle was made, within the month's export quota. */
export function planExport(state: OrgState, body: ExportRecordBody, recordedAt: string, limits: WriterLimits = NO_LIMITS): ExportRecord | Refusal {
  const used = state.month === recordedAt.slice(0, 7) ? state.monthExports : 0;
  if (limits.exportsPerMonth !== null && used >= limits.exportsPerMonth) {
    return {
      ok: false,
      code: 'quota_exceeded',
      message: `the ${limits.plan} plan allows ${limits.exportsPerMonth} export bundles a month and this month's are used; upgrade the plan or wait for the next month (UTC)`,
      retryAfterSeconds: limits.untilNextMonth,
    };
  }
  const record = { manifest_sha256: body.manifest_sha256, since_seq: body.since_seq, until_seq: body.until_seq, files: body.files, agents: body.agents };
  return { kind: 'export', recordedAt, agentId: null, body: record };
}

/** The JCS text of a decided record's body (built once: the ingest rule builds its own). */
export function bodyJsonOf(planned: Planned): string {
  return planned.kind === 'event' ? planned.bodyJson : canonicalize(planned.body);
}

/**
 * What the caller of a decided record is told, asked once `evolve` has applied it: the gate or the
 * review decided, or the agent as it now is. An export is told its place in the chain
 * (exportResult), so it has no answer before its row is made.
 */
export function answerOf(state: OrgState, planned: Planned): IngestResult | ReviewResult | AgentView | null {
  switch (planned.kind) {
    case 'event':
    case 'review':
      return planned.result;
    case 'agent':
      return state.agents.get(planned.agentId)?.view ?? null;
    case 'export':
      return null;
  }
}

/** The answer to an export, from its record and its row. */
export function exportResult(record: ExportRecord, row: { seq: number; recordedAt: string; chainHash: Buffer }): ExportResult {
  return { ...record.body, seq: row.seq, recorded_at: row.recordedAt, chain_hash: row.chainHash.toString('hex') };
}

function countAgents(state: OrgState, which: (view: AgentView) => boolean): number {
  let n = 0;
  for (const entry of state.agents.values()) if (which(entry.view)) n++;
  return n;
}

function limitRefusal(what: string, limit: number, plan: string): Refusal {
  return { ok: false, code: 'plan_limit', message: `the ${plan} plan allows ${limit} ${what}; upgrade the plan to add more` };
}
