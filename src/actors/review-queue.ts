import type { ProjectionHandler } from './projection.js';
import { parseRecord } from '../domain/records.js';

/** Decided items listed per org by GET /reviews?status=decided (the latest ones). */
export const MAX_DECIDED = 10_000;

/** A held action as a reviewer sees it. */
export interface ReviewItem {
  action_id: number;
  event_id: number;
  agent_id: string;
  gate: string;
  bii: number | null;
  reason: string;
  event_type: string;
  recorded_at: string;
  ledger_seq: number;
  /** pending, escalated (still open), released or rejected. */
  status: 'pending' | 'escalated' | 'released' | 'rejected';
  note: string | null;
  reviewer: string | null;
  decided_at: string | null;
}

interface OrgQueue {
  /** Open items (pending or escalated), oldest first. */
  open: Map<number, ReviewItem>;
  /** Released or rejected, in the order decided. */
  decided: ReviewItem[];
  /** The seq of each decided item's review record (same index): the order decided. */
  decidedSeqs: number[];
  head: string | null;
  length: number;
}

export interface ReviewQueueSnapshot {
  head: string | null;
  length: number;
  open: ReviewItem[];
  decided: ReviewItem[];
  decidedSeqs: number[];
}

/**
 * Projection of every org's review queue from committed rows: an event the gate held opens an
 * item; a review record escalates or closes it. Reads never touch the store.
 */
export class ReviewQueue {
  private readonly orgs = new Map<string, OrgQueue>();

  readonly onCommitted: ProjectionHandler = (org, rows) => {
    const queue = this.queueOf(org);
    for (const row of rows) {
      queue.length = row.seq;
      const record = parseRecord(row);
      if (record === null) continue;
      if (record.kind === 'event') {
        const body = record.body;
        if (!body.requires_human_review) continue;
        queue.open.set(body.action_id, {
          action_id: body.action_id,
          event_id: body.event_id,
          agent_id: record.agentId,
          gate: body.gate_status,
          bii: body.bii,
          reason: body.reason ?? '',
          event_type: body.event_type,
          recorded_at: record.recordedAt,
          ledger_seq: row.seq,
          status: 'pending',
          note: null,
          reviewer: null,
          decided_at: null,
        });
      } else if (record.kind === 'review') {
        const body = record.body;
        const id = body.action_id;
        const item = queue.open.get(id);
        if (item === undefined) continue;
        const decided: ReviewItem = {
          ...item,
          status: body.outcome,
          note: body.note ?? '',
          reviewer: body.reviewer ?? '',
          decided_at: record.recordedAt,
        };
        if (decided.status === 'escalated') queue.open.set(id, decided);
        else {
          queue.open.delete(id);
          queue.decided.push(decided);
          queue.decidedSeqs.push(row.seq);
          // The latest decisions only: older ones stay in the ledger (and in export bundles).
          if (queue.decided.length > 2 * MAX_DECIDED) {
            queue.decided.splice(0, queue.decided.length - MAX_DECIDED);
            queue.decidedSeqs.splice(0, queue.decidedSeqs.length - MAX_DECIDED);
          }
        }
      }
    }
    const last = rows[rows.length - 1];
    if (last !== undefined) queue.head = last.chainHash.toString('hex');
  };

  /** Open items oldest first, or decided ones newest first. */
  list(org: string, status: 'pending' | 'decided', limit: number, agentId?: string): ReviewItem[] {
    const queue = this.orgs.get(org);
    if (queue === undefined) return [];
    const out: ReviewItem[] = [];
    const take = (item: ReviewItem): boolean => {
      if (agentId === undefined || item.agent_id === agentId) out.push(item);
      return out.length < limit;
    };
    if (status === 'pending') {
      for (const item of queue.open.values()) if (!take(item)) break;
    } else {
      // The latest MAX_DECIDED only, however many the list holds between trims: what is listed
      // then never depends on when the list was last trimmed (or how it was rebuilt).
      const oldest = Math.max(0, queue.decided.length - MAX_DECIDED);
      for (let i = queue.decided.length - 1; i >= oldest; i--) if (!take(queue.decided[i]!)) break;
    }
    return out;
  }

  snapshot(org: string): ReviewQueueSnapshot | undefined {
    const q = this.orgs.get(org);
    // Items are replaced, never changed in place: the arrays can share them.
    return q === undefined ? undefined : { head: q.head, length: q.length, open: [...q.open.values()], decided: [...q.decided], decidedSeqs: [...q.decidedSeqs] };
  }

  restore(org: string, snapshot: ReviewQueueSnapshot): void {
    this.orgs.set(org, {
      head: snapshot.head,
      length: snapshot.length,
      open: new Map(snapshot.open.map((item) => [item.action_id, item])),
      decided: [...snapshot.decided],
      decidedSeqs: [...snapshot.decidedSeqs],
    });
  }

  orgNames(): string[] {
    return [...this.orgs.keys()];
  }

  private queueOf(org: string): OrgQueue {
    let queue = this.orgs.get(org);
    if (queue === undefined) {
      queue = { open: new Map(), decided: [], decidedSeqs: [], head: null, length: 0 };
      this.orgs.set(org, queue);
    }
    return queue;
  }
}

/**
 * Joins queues rebuilt from disjoint sets of agents (a partitioned replay) into the one a single
 * replay would have built: open items oldest first, decisions in the order of their records.
 */
export function mergeReviewQueues(parts: readonly ReviewQueueSnapshot[], head: string | null, length: number): ReviewQueueSnapshot {
  const open = parts.flatMap((p) => p.open).sort((a, b) => a.ledger_seq - b.ledger_seq);
  const decided = parts.flatMap((p) => p.decided.map((item, i) => ({ item, seq: p.decidedSeqs[i]! }))).sort((a, b) => a.seq - b.seq);
  // Each part kept at least its latest MAX_DECIDED, so these are the latest of all (all a list shows).
  const kept = decided.slice(-MAX_DECIDED);
  return { head, length, open, decided: kept.map((d) => d.item), decidedSeqs: kept.map((d) => d.seq) };
}
