import type { OrgCommand, OrgReply } from '../bus/messages.js';
import { chainRows, type RowDraft, type Sha256Chain } from '../domain/ledger-batch.js';
import type { LedgerRow } from '../domain/ledger.js';
import { answerOf, bodyJsonOf, exportResult, planExport, planIngest, planRegister, planUpdate, type Planned } from '../domain/org-decide.js';
import { evolve, type OrgState, type Refusal, type WriterLimits } from '../domain/org-state.js';
import { planReview } from '../domain/org-reviews.js';
import type { Policy } from '../domain/policy.js';

/** A command as the writer queued it. */
export interface Queued {
  command: OrgCommand;
  /** The caller's connection: gone before this command is decided, it is refused unrecorded. */
  abandoned: { readonly aborted: boolean } | undefined;
}

/** Where a batch goes in the chain, and what holds for all of it. */
export interface BatchContext {
  head: Buffer;
  nextSeq: number;
  recordedAt: string;
  limits: WriterLimits;
  policy: Policy;
  policyDigest: string;
  sha256Chain: Sha256Chain | null;
}

export interface DecidedBatch {
  /** One reply per command decided, in order (the first `replies.length` commands). */
  replies: OrgReply[];
  /** The rows the accepted commands make, chained after `head`. */
  rows: LedgerRow[];
  /** What the planning of the last command decided threw (its reply is PLANNING_FAILED), or null; see decideBatch. */
  failure: { error: unknown } | null;
}

const ABANDONED: OrgReply = { ok: false, code: 'unavailable', message: 'the caller was gone before the command was decided; nothing was recorded' };
export const PLANNING_FAILED: OrgReply = { ok: false, code: 'internal', message: 'the command could not be decided; nothing was recorded' };

/**
 * Decides a batch of commands in order against `state`, applying each accepted record with
 * `evolve` (the function a replay folds the ledger with) so later commands see it, then hashes the
 * rows at once (planning never reads the chain). A command whose planning throws is refused alone
 * and ends the batch: it may have changed the state before it threw, so the caller must rebuild
 * the state from the ledger before deciding the commands after it.
 */
export function decideBatch(state: OrgState, batch: readonly Queued[], at: BatchContext): DecidedBatch {
  const decided: (OrgReply | { planned: Planned; answer: unknown })[] = [];
  const drafts: RowDraft[] = [];
  let failure: DecidedBatch['failure'] = null;
  for (const { command, abandoned } of batch) {
    if (abandoned?.aborted === true) {
      decided.push(ABANDONED);
      continue;
    }
    let planned: Planned | Refusal;
    let bodyJson: string;
    try {
      planned = plan(state, command, at);
      if ('ok' in planned) {
        decided.push(planned);
        continue;
      }
      bodyJson = bodyJsonOf(planned);
      evolve(state, planned, at.policy);
    } catch (error) {
      decided.push(PLANNING_FAILED);
      failure = { error };
      break;
    }
    decided.push({ planned, answer: answerOf(state, planned) });
    drafts.push({ kind: planned.kind, recordedAt: at.recordedAt, agentId: planned.agentId, bodyJson, body: planned.body });
  }
  const rows = chainRows(at.head, at.nextSeq, drafts, at.sha256Chain);
  let r = 0;
  const replies = decided.map((reply): OrgReply => {
    if ('ok' in reply) return reply;
    const row = rows[r++]!;
    const { planned, answer } = reply;
    return { ok: true, value: planned.kind === 'export' ? exportResult(planned, row) : answer } as OrgReply;
  });
  return { replies, rows, failure };
}

function plan(state: OrgState, command: OrgCommand, at: BatchContext): Planned | Refusal {
  switch (command.type) {
    case 'agent.register':
      return planRegister(state, command.agent, at.recordedAt, at.limits);
    case 'agent.update':
      return planUpdate(state, command.agentId, command.changes, at.recordedAt, at.limits);
    case 'event.ingest':
      return planIngest(state, command.event, at.policy, at.policyDigest, at.recordedAt, at.limits);
    case 'review.decide':
      return planReview(state, command.actionId, command.decision, command.reviewer, at.policy, at.recordedAt);
    case 'export.record':
      return planExport(state, command.export, at.recordedAt, at.limits);
  }
}
