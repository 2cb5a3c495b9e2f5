import { describe, expect, it } from 'vitest';
import { digestOfRequest, keyedFromRecord, RecentKeys } from '../../src/domain/idempotency.js';
import { GENESIS_HASH, leafInput, makeRow } from '../../src/domain/ledger.js';
import { leafHash } from '../../src/domain/merkle.js';
import type { EventRecordBody } from '../../src/domain/records.js';
import type { IngestEventBody } from '../../src/domain/schemas.js';

const request: IngestEventBody = { agent_id: 'a', event_type: 'output_generated', payload: { b: 1, a: [1, 'x'] }, dti: 0.25, source: 'otel', actor: 'svc', idempotency_key: 'k' };
const recorded: EventRecordBody = {
  event_id: 7,
  action_id: 7,
  event_type: 'output_generated',
  source: 'otel',
  actor: 'svc',
  dti: 0.25,
  payload: { a: [1, 'x'], b: 1 },
  gate_status: 'pass',
  bii: 0.9,
  composite_trust: 0.8,
  reason: 'ok',
  requires_human_review: false,
  policy_digest: 'p',
  observed: true,
  idempotency_key: 'k',
};

describe('idempotency keys', () => {
  it('a request and the record it made have one digest (key order aside); any field that differs changes it', () => {
    const row = makeRow(GENESIS_HASH, 12, 'event', '2026-11-24T00:00:00.000Z', 'a', recorded);
    const keyed = keyedFromRecord(row, 'a', recorded);
    expect(keyed).toEqual({ seq: 12, recordedAt: row.recordedAt, leafHash: leafHash(leafInput(row)), digest: digestOfRequest(request), result: { event_id: 7, action_id: 7, gate_status: 'pass', bii: 0.9, composite_trust: 0.8, reason: 'ok', requires_human_review: false } });
    expect(digestOfRequest({ ...request, idempotency_key: 'other' })).toBe(keyed.digest); // the key is not part of what is asked
    for (const change of [{ agent_id: 'b' }, { event_type: 'config_read' as const }, { payload: { b: 2, a: [1, 'x'] } }, { dti: null }, { source: 'self' as const }, { actor: null }]) {
      expect(digestOfRequest({ ...request, ...change })).not.toBe(keyed.digest);
    }
  });

  it('RecentKeys holds the newest `limit` keys of durable rows (never evicting one not durable yet) and forgets those past a seq', () => {
    const keys = new RecentKeys(3);
    const at = (seq: number) => ({ ...keyedFromRecord(makeRow(GENESIS_HASH, seq, 'event', '2026-11-24T00:00:00.000Z', 'a', recorded), 'a', recorded), digest: 'd' });
    const seqs = (names: string[]) => names.map((k) => keys.get(k)?.seq ?? null);
    for (const [k, seq] of [['a', 1], ['b', 2], ['c', 3], ['d', 4]] as const) keys.add(k, at(seq));
    expect(seqs(['a', 'b', 'c', 'd'])).toEqual([1, 2, 3, 4]); // nothing durable yet: nothing evicted
    keys.durableThrough(2);
    expect(seqs(['a', 'b', 'c', 'd'])).toEqual([null, 2, 3, 4]);
    keys.add('e', at(5));
    expect(seqs(['b', 'c', 'd', 'e'])).toEqual([null, 3, 4, 5]);
    keys.dropAbove(3);
    expect(seqs(['c', 'd', 'e'])).toEqual([3, null, null]);
  });

  it('RecentKeys: a key added again counts from its new place; many keys keep it at its limit, evicting in order', () => {
    const keys = new RecentKeys(3);
    const at = (seq: number) => ({ ...keyedFromRecord(makeRow(GENESIS_HASH, seq, 'event', '2026-11-24T00:00:00.000Z', 'a', recorded), 'a', recorded), digest: 'd' });
    keys.add('a', at(1));
    keys.add('b', at(2));
    keys.add('a', at(3)); // a again: now the newest
    keys.add('c', at(4));
    keys.add('d', at(5));
    keys.durableThrough(5);
    expect(['a', 'b', 'c', 'd'].map((k) => keys.get(k)?.seq ?? null)).toEqual([3, null, 4, 5]);
    const many = new RecentKeys(1000);
    for (let seq = 1; seq <= 50_000; seq++) {
      many.add(`k${seq}`, at(seq));
      if (seq % 100 === 0) many.durableThrough(seq - 50);
    }
    expect(many.get('k48950')).toBeUndefined();
    expect(many.get('k49001')?.seq).toBe(49001);
    expect(many.get('k50000')?.seq).toBe(50000);
  });
});

