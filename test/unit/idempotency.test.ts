import { describe, expect, it } from 'vitest';
import { digestOfRequest, keyedFromRecord, RecentKeys } from '../../src/domain/idempotency.js';
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
    const keyed = keyedFromRecord(12, 'a', recorded);
    expect(keyed).toEqual({ seq: 12, digest: digestOfRequest(request), result: { event_id: 7, action_id: 7, gate_status: 'pass', bii: 0.9, composite_trust: 0.8, reason: 'ok', requires_human_review: false } });
    expect(digestOfRequest({ ...request, idempotency_key: 'other' })).toBe(keyed.digest); // the key is not part of what is asked
    for (const change of [{ agent_id: 'b' }, { event_type: 'config_read' as const }, { payload: { b: 2, a: [1, 'x'] } }, { dti: null }, { source: 'self' as const }, { actor: null }]) {
      expect(digestOfRequest({ ...request, ...change })).not.toBe(keyed.digest);
    }
  });

  it('RecentKeys holds the newest `limit` keys of durable rows (never evicting one not durable yet) and forgets those past a seq', () => {
    const keys = new RecentKeys(3);
    const at = (seq: number) => ({ seq, digest: 'd', result: keyedFromRecord(seq, 'a', recorded).result });
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
});
