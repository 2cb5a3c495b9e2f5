import type { IngestEventBody } from '../domain/schemas.js';
import type { Decision, Gate } from '../domain/scoring.js';
import type { ChatTurn } from './language-model.js';
import type { StudioAgent } from './studio-agent.js';

/** The pure parts of a chat turn: the event it is recorded as, and the answer. */

/** A chat message asking for a forbidden action is scored with at least this dti (severe). */
export const FORBIDDEN_REQUEST_DTI = 0.9;

export interface ChatInput {
  message: string;
  history: ChatTurn[];
  dti: number | null;
}

/** The spec 2.10 chat result. */
export interface ChatResult {
  response: string;
  gate_status: Gate;
  bii: number;
  composite_trust: number;
  reason: string;
  requires_human_review: boolean;
  event_id: number;
  agent_name: string;
  agent_domain: string;
  agent_risk: string;
}

/**
 * The `output_generated` event of one reply. Only lengths and the verdict are recorded, never
 * the message or reply text. A forbidden request raises the dti to FORBIDDEN_REQUEST_DTI.
 */
export function chatEvent(
  agentId: string,
  input: ChatInput,
  reply: { text: string; provider: string },
  forbidden: string | null,
  actor: string,
): IngestEventBody {
  const payload: Record<string, unknown> = {
    content_length: reply.text.length,
    message_length: input.message.length,
    forbidden_request: forbidden !== null,
    provider: reply.provider,
  };
  if (forbidden !== null) payload.matched_action = forbidden;
  const dti = forbidden === null ? input.dti : Math.max(input.dti ?? 0, FORBIDDEN_REQUEST_DTI);
  return { agent_id: agentId, event_type: 'output_generated', payload, dti, source: 'service', actor };
}

/** The answer; when the gate does not pass, the reply is withheld and `response` says so. */
export function chatResult(agent: StudioAgent, reply: string, decision: Decision & { action_id: number; event_id: number }): ChatResult {
  const response =
    decision.gate_status === 'pass'
      ? reply
      : `This reply is held for human review (gate ${decision.gate_status}: ${decision.reason}; action ${decision.action_id}).`;
  return {
    response,
    gate_status: decision.gate_status,
    bii: decision.bii,
    composite_trust: decision.composite_trust,
    reason: decision.reason,
    requires_human_review: decision.requires_human_review,
    event_id: decision.event_id,
    agent_name: agent.name,
    agent_domain: agent.domain,
    agent_risk: agent.risk_level,
  };
}
