import { describe, expect, it } from 'vitest';
import { mergeWriterSnapshots, type WriterSnapshot } from '../../src/actors/org-recovery.js';
import { MAX_DECIDED, mergeReviewQueues, ReviewQueue, type ReviewItem } from '../../src/actors/review-queue.js';
import type { LedgerRow } from '../../src/domain/ledger.js';
import { mergeMeters } from '../../src/actors/usage-meter.js';

const writer = (over: Partial<WriterSnapshot>): WriterSnapshot => ({
  lastSeq: 0,
  fence: 0,
  head: Buffer.alloc(32),
  lastMs: 0,
  nextEventId: 1,
  agents: [],
  held: [],
  closed: [],
  month: '',
  monthEvents: 0,
  monthExports: 0,
  ...over,
});

describe('joining the parts of a partitioned replay', () => {
  const tail = { seq: 99, fence: 99, head: Buffer.alloc(32, 9), ms: Date.parse('2026-11-20T00:00:00Z') };

  it('writer: month counters are those of the latest month; ids continue after the highest', () => {
    const merged = mergeWriterSnapshots(
      [
        writer({ month: '2026-11', monthEvents: 5, monthExports: 1, nextEventId: 40, held: [[30, { agentId: 'a', gate: 'hold', outcome: null, risky: true }]], closed: [7] }),
        // Its agents' last events were in October: none of its counts are November's.
        writer({ month: '2026-10', monthEvents: 9, nextEventId: 12, closed: [3] }),
        writer({ month: '2026-11', monthEvents: 2, nextEventId: 57, held: [[12, { agentId: 'b', gate: 'alert', outcome: 'escalated', risky: false }]] }),
      ],
      tail,
    );
    expect(merged).toMatchObject({ lastSeq: 99, lastMs: tail.ms, month: '2026-11', monthEvents: 7, monthExports: 1, nextEventId: 57, closed: [3, 7] });
    expect(merged.held.map(([id]) => id)).toEqual([12, 30]);
    expect(merged.head.equals(tail.head)).toBe(true);
  });

  it('writer: parts that saw no event or export leave the counters alone', () => {
    expect(mergeWriterSnapshots([writer({}), writer({})], tail)).toMatchObject({ month: '', monthEvents: 0, nextEventId: 1 });
  });

  it('meter: events and exports add up per month, agent sets join', () => {
    const merged = mergeMeters(
      [
        { head: null, length: 5, months: [['2026-11', { events: 3, agents: ['a'], exports: 1 }]] },
        { head: null, length: 9, months: [['2026-10', { events: 1, agents: ['b'], exports: 0 }], ['2026-11', { events: 4, agents: ['b', 'c'], exports: 0 }]] },
      ],
      'ff',
      10,
    );
    expect(merged).toEqual({
      head: 'ff',
      length: 10,
      months: [
        ['2026-10', { events: 1, agents: ['b'], exports: 0 }],
        ['2026-11', { events: 7, agents: ['a', 'b', 'c'], exports: 1 }],
      ],
    });
  });

  it('reviews: decisions in record order, the latest MAX_DECIDED kept', () => {
    const item = (id: number): ReviewItem => ({
      action_id: id,
      event_id: id,
      agent_id: 'a',
      gate: 'hold',
      bii: 0.5,
      reason: '',
      event_type: 'output_generated',
      recorded_at: '',
      ledger_seq: id,
      status: 'released',
      note: '',
      reviewer: 'r',
      decided_at: '',
    });
    const part = (seqs: number[]) => ({ head: null, length: 0, open: [], decided: seqs.map(item), decidedSeqs: seqs });
    const evens = Array.from({ length: MAX_DECIDED }, (_, i) => 2 * i + 2);
    const odds = Array.from({ length: MAX_DECIDED }, (_, i) => 2 * i + 1);
    const merged = mergeReviewQueues([part(evens), part(odds)], null, 0);
    expect(merged.decidedSeqs).toHaveLength(MAX_DECIDED);
    expect(merged.decidedSeqs[0]).toBe(MAX_DECIDED + 1);
    expect(merged.decidedSeqs.at(-1)).toBe(2 * MAX_DECIDED);
    expect(merged.decided.map((d) => d.action_id)).toEqual(merged.decidedSeqs);
  });

  it('reviews: the decisions listed do not depend on when the queue was trimmed', () => {
    // 15,000 decisions, the oldest 300 on one agent: a one-pass queue still holds them (it trims
    // past 2 × MAX_DECIDED), a joined one does not; both list only the latest MAX_DECIDED.
    const row = (seq: number, kind: string, agentId: string, body: Record<string, unknown>): LedgerRow => ({
      seq, kind, agentId, body, bodyJson: JSON.stringify(body), recordedAt: '2026-11-23T00:00:00.000Z', contentHash: Buffer.alloc(32), prevHash: Buffer.alloc(32), chainHash: Buffer.alloc(32),
    });
    const rows: LedgerRow[] = [];
    const n = 15_000;
    for (let id = 1; id <= n; id++) {
      const agent = id <= 300 ? 'old-agent' : 'busy-agent';
      rows.push(row(id, 'event', agent, { action_id: id, event_id: id, requires_human_review: true, gate_status: 'hold', bii: 0.6, event_type: 'output_generated', reason: 'r' }));
    }
    for (let id = 1; id <= n; id++) rows.push(row(n + id, 'review', id <= 300 ? 'old-agent' : 'busy-agent', { action_id: id, outcome: 'released', note: '', reviewer: 'r' }));
    const onePass = new ReviewQueue();
    onePass.onCommitted('o', rows);
    const joined = new ReviewQueue();
    joined.restore('o', mergeReviewQueues([onePass.snapshot('o')!], null, rows.length));
    expect(onePass.snapshot('o')!.decided.length).toBe(n);
    for (const queue of [onePass, joined]) {
      expect(queue.list('o', 'decided', 100, 'old-agent')).toEqual([]);
      expect(queue.list('o', 'decided', 3).map((d) => d.action_id)).toEqual([n, n - 1, n - 2]);
    }
  });
});
