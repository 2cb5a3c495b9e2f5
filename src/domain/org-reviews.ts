import type { PlannedReview } from './org-decide.js';
import type { HeldAction, OrgState, Refusal } from './org-state.js';
import type { Policy } from './policy.js';
import type { ReviewRecordBody } from './records.js';
import type { ReviewDecisionBody, ReviewOutcome } from './schemas.js';
import { copyState, FRESH_STATE, gateFor, type Gate } from './scoring.js';

/** A reviewer's decision on a held action: decided by the org's writer, applied alike on replay. */

export interface ReviewResult {
  action_id: number;
  event_id: number;
  agent_id: string;
  outcome: ReviewOutcome;
  note: string;
  reviewer: string;
  /** The gate that held the action. */
  held_gate: Gate;
  /** The agent's gate and BII after the decision. */
  gate_status: Gate | null;
  bii: number | null;
  decided_at: string;
}

/**
 * Whether releasing `released` leaves an incident of its agent unjudged: an open held action whose
 * event was a risky signal and that came after it, or, for the release of a clean held event, any
 * open incident at all.
 */
function leavesIncidentOpen(state: OrgState, released: HeldAction, actionId: number): boolean {
  for (const [id, held] of state.held) {
    if (id === actionId || held.agentId !== released.agentId || !held.risky) continue;
    if (id > actionId || !released.risky) return true;
  }
  return false;
}

/**
 * Plans a reviewer's decision on a held action. Released and rejected are final (a second
 * decision is a conflict); escalated leaves the action open for a later decision.
 *
 * A release is the reviewer vouching for the agent as it is now. An incident is a held action whose
 * event was a risky signal; clean events held only because the agent already was are not. If the
 * agent is not at pass, releasing its latest open incident, or a clean held event while no
 * incident of the agent is open, raises its BII to the pass line (kept if above) and its gate to
 * pass (a collapse included): its clean events then pass, and a new risky signal holds it again at
 * once by the normal scoring. Releasing an older incident, or a clean event while an incident is
 * open, vouches for nothing: a later incident (or that open one) has not been judged. Older open
 * incidents stay in the queue for their own decision. Rejecting and escalating never change the
 * agent's score. The record carries the resulting gate and BII, which a replay applies.
 */
export function planReview(
  state: OrgState,
  actionId: number,
  decision: ReviewDecisionBody,
  reviewer: string,
  policy: Policy,
  recordedAt: string,
): PlannedReview | Refusal {
  if (state.closed.has(actionId)) return { ok: false, code: 'conflict', message: `action ${actionId} was already decided (released or rejected)` };
  const held = state.held.get(actionId);
  if (held === undefined) {
    return { ok: false, code: 'not_found', message: `no held action ${actionId}: only actions gated hold, alert or collapse await review` };
  }
  const agent = state.agents.get(held.agentId);
  const scoring = agent?.scoring ?? FRESH_STATE;
  let gate = scoring.gate;
  let bii = scoring.bii;
  if (decision.outcome === 'released' && gate !== null && gate !== 'pass' && !leavesIncidentOpen(state, held, actionId)) {
    bii = Math.max(bii ?? policy.initial_bii, policy.thresholds.pass);
    gate = gateFor(policy, bii);
  }
  const body = {
    action_id: actionId,
    event_id: actionId,
    outcome: decision.outcome,
    note: decision.note,
    reviewer,
    held_gate: held.gate,
    gate_status: gate,
    bii,
  };
  return {
    kind: 'review',
    recordedAt,
    agentId: held.agentId,
    body,
    result: { ...body, agent_id: held.agentId, decided_at: recordedAt },
  };
}

/** Applies a `review` record: the action's outcome, and the agent's gate as recorded. */
export function applyReviewRecord(state: OrgState, agentId: string, body: ReviewRecordBody): void {
  const actionId = body.action_id;
  const held = state.held.get(actionId);
  if (held !== undefined) {
    // Closed actions leave `held` (which stays the set of open ones) for the compact `closed`.
    if (body.outcome === 'escalated') state.held.set(actionId, { ...held, outcome: body.outcome });
    else {
      state.held.delete(actionId);
      state.closed.add(actionId);
    }
  }
  const agent = state.agents.get(agentId);
  // Bodies of the first version carry no gate: they leave the agent's score alone.
  if (agent === undefined || body.gate_status === undefined || body.gate_status === null) return;
  if (body.gate_status === agent.scoring.gate && body.bii === agent.scoring.bii) return;
  const next = copyState(agent.scoring);
  next.gate = body.gate_status;
  if (typeof body.bii === 'number') next.bii = body.bii;
  agent.scoring = next;
}
