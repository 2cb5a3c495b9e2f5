import type { LogEntry, LedgerCommand, OrgReply } from '../bus/messages.js';
import { chainRows, type RowDraft, type Sha256Rows } from '../domain/ledger-batch.js';
import { rowLeafHash, type LedgerRow } from '../domain/ledger.js';
import { answerOf, bodyJsonOf, exportResult, planExport, planIngest, planRegister, planUpdate, type Planned } from '../domain/org-decide.js';
import { evolve, type OrgState, type Refusal, type WriterLimits } from '../domain/org-state.js';
import { planReview } from '../domain/org-reviews.js';
import type { Policy } from '../domain/policy.js';
import { digestOfRequest, type KeyedEvent } from '../domain/idempotency.js';

/** A command as the writer queued it. */
export interface Queued {
  command: LedgerCommand;
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
  sha256Rows: Sha256Rows | null;
  /** The org's idempotency keys recorded or decided so far; events decided here are added. */
  keys: IdempotencyKeys;
}

export interface IdempotencyKeys {
  find(key: string): KeyedEvent | undefined;
  add(key: string, keyed: KeyedEvent): void;
}

export interface DecidedBatch {
  /** One reply per command decided, in order (the first `replies.length` commands). */
  replies: OrgReply[];
  /** The rows the accepted commands make, chained after `head`. */
  rows: LedgerRow[];
  /** What the planning of the last command decided threw (its reply is PLANNING_FAILED), or null; see decideBatch. */
  failure: { error: unknown } | null;
}

const ABANDONED: OrgReply = { ok: false, code: 'unavailable', message: 'the caller was gone, or the command\'s deadline passed, before it was decided; nothing was recorded' };
export const PLANNING_FAILED: OrgReply = { ok: false, code: 'internal', message: 'the command could not be decided; nothing was recorded' };

/**
 * Decides a batch of commands in order against `state`, applying each accepted record with
 * `evolve` (the function a replay folds the ledger with) so later commands see it, then hashes the
 * rows at once (planning never reads the chain). A command whose planning throws is refused alone
 * and ends the batch: it may have changed the state before it threw, so the caller must rebuild
 * the state from the ledger before deciding the commands after it.
 */
export function decideBatch(state: OrgState, batch: readonly Queued[], at: BatchContext): DecidedBatch {
  const decided: (OrgReply | { planned: Planned; answer: unknown; receipt: boolean; key?: { key: string; digest: string } } | { sameAs: number; receipt: boolean })[] = [];
  /** Keys decided in this batch: a second event with one is answered as the first (once durable). */
  const batchKeys = new Map<string, { at: number; digest: string }>();
  const drafts: RowDraft[] = [];
  let failure: DecidedBatch['failure'] = null;
  for (const { command, abandoned } of batch) {
    if (abandoned?.aborted === true) {
      decided.push(ABANDONED);
      continue;
    }
    let planned: Planned | Refusal;
    let bodyJson: string;
    let keyed: { key: string; digest: string } | undefined;
    try {
      if (command.type === 'event.ingest' && command.event.idempotency_key !== undefined) {
        keyed = { key: command.event.idempotency_key, digest: digestOfRequest(command.event) };
        const earlier = batchKeys.get(keyed.key);
        if (earlier !== undefined) {
          decided.push(earlier.digest === keyed.digest ? { sameAs: earlier.at, receipt: receiptAsked(command) } : idempotencyConflict(keyed.key));
          continue;
        }
        const before = at.keys.find(keyed.key);
        if (before !== undefined) {
          const entry = receiptAsked(command) ? { entry: { seq: before.seq, recorded_at: before.recordedAt, leaf_hash: before.leafHash.toString('hex') } } : {};
          decided.push(before.digest === keyed.digest ? { ok: true, value: before.result, ...entry } : idempotencyConflict(keyed.key));
          continue;
        }
      }
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
    if (keyed !== undefined) batchKeys.set(keyed.key, { at: decided.length, digest: keyed.digest });
    decided.push({ planned, answer: answerOf(state, planned), receipt: receiptAsked(command), ...(keyed === undefined ? {} : { key: keyed }) });
    drafts.push({ kind: planned.kind, recordedAt: at.recordedAt, agentId: planned.agentId, bodyJson, body: planned.body });
  }
  const rows = chainRows(at.head, at.nextSeq, drafts, at.sha256Rows);
  let r = 0;
  const replies: OrgReply[] = [];
  /** The row each accepted command made, by its place in the batch. */
  const rowAt: LedgerRow[] = [];
  for (const reply of decided) {
    if ('sameAs' in reply) {
      const first = replies[reply.sameAs]!;
      replies.push(reply.receipt && first.ok ? { ...first, entry: logEntry(rowAt[reply.sameAs]!) } : first);
      continue;
    }
    if ('ok' in reply) {
      replies.push(reply);
      continue;
    }
    const row = rows[r++]!;
    rowAt[replies.length] = row;
    const { planned, answer, key, receipt } = reply;
    // A copy: the row's hash is a view of its whole batch's hash buffer, which a kept key must not pin.
    if (key !== undefined) at.keys.add(key.key, { seq: row.seq, result: answer as KeyedEvent['result'], digest: key.digest, recordedAt: row.recordedAt, leafHash: Buffer.from(rowLeafHash(row)) });
    const value = planned.kind === 'export' ? exportResult(planned, row) : answer;
    // The entry only when asked: the common reply stays one small literal (the hot path).
    replies.push((receipt ? { ok: true, value, entry: logEntry(row) } : { ok: true, value }) as OrgReply);
  }
  return { replies, rows, failure };
}

function logEntry(row: LedgerRow): LogEntry {
  return { seq: row.seq, recorded_at: row.recordedAt, leaf_hash: rowLeafHash(row).toString('hex') };
}

/** An event whose caller asked for a receipt (its reply then carries the record's log entry). */
function receiptAsked(command: LedgerCommand): boolean {
  return command.type === 'event.ingest' && command.receipt === true;
}

function idempotencyConflict(key: string): OrgReply {
  return { ok: false, code: 'idempotency_conflict', message: `idempotency key ${key} was used before with a different event; nothing was recorded` };
}

function plan(state: OrgState, command: LedgerCommand, at: BatchContext): Planned | Refusal {
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
