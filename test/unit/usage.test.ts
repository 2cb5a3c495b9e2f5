import { describe, expect, it } from 'vitest';
import { UsageMeter } from '../../src/actors/usage-meter.js';
import { GENESIS_HASH, makeRow, type LedgerRow } from '../../src/domain/ledger.js';
import { planExport, planIngest, planRegister, planUpdate } from '../../src/domain/org-decide.js';
import { applyAgentRecord, emptyOrgState, NO_LIMITS } from '../../src/domain/org-state.js';
import { POLICY_V1, policyDigest } from '../../src/domain/policy.js';
import { applied } from '../support/decide.js';

const DIGEST = policyDigest(POLICY_V1);

function rows(spec: [kind: string, at: string, agent: string | null][]): LedgerRow[] {
  let prev = GENESIS_HASH;
  return spec.map(([kind, at, agent], i) => {
    const row = makeRow(prev, i + 1, kind, at, agent, { n: i });
    prev = row.chainHash;
    return row;
  });
}

describe('usage meter', () => {
  it('counts by the UTC month of recorded_at, across a month boundary, and survives a snapshot', () => {
    const meter = new UsageMeter();
    meter.onCommitted('o', rows([
      ['agent', '2026-01-31T23:59:59.000Z', 'a'],
      ['event', '2026-01-31T23:59:59.999Z', 'a'],
      ['event', '2026-01-31T23:59:59.999Z', 'b'],
      ['event', '2026-02-01T00:00:00.000Z', 'a'],
      ['export', '2026-02-01T00:00:00.001Z', null],
      ['review', '2026-02-01T00:00:00.002Z', 'a'],
    ]));
    expect(meter.usage('o', '2026-01')).toEqual({ events: 2, agents_active: 2, exports: 0 });
    expect(meter.usage('o', '2026-02')).toEqual({ events: 1, agents_active: 1, exports: 1 });
    expect(meter.usage('o', '2026-03')).toEqual({ events: 0, agents_active: 0, exports: 0 });
    expect(meter.usage('other', '2026-01')).toEqual({ events: 0, agents_active: 0, exports: 0 });
    const copy = new UsageMeter();
    copy.restore('o', JSON.parse(JSON.stringify(meter.snapshot('o'))));
    expect(copy.usage('o', '2026-01')).toEqual(meter.usage('o', '2026-01'));
    expect(copy.snapshot('o')).toEqual(meter.snapshot('o'));
  });
});

describe('blocking limits in the org writer', () => {
  const limits = { plan: 'tiny', eventsPerMonth: 2, exportsPerMonth: 1, agents: 2, publicAgents: 1, untilNextMonth: 1234 };
  const event = { agent_id: 'a', event_type: 'output_generated' as const, payload: {}, dti: null, source: 'self' as const, actor: null };

  it('refuses events past the monthly quota until the next UTC month, and counts only recorded ones', () => {
    const state = emptyOrgState();
    applyAgentRecord(state, { agent_id: 'a', name: 'A', kind: 'production', observed: true }, 't');
    expect(applied(state, planIngest(state, event, POLICY_V1, DIGEST, '2026-01-31T10:00:00.000Z', limits))).toMatchObject({ kind: 'event' });
    expect(applied(state, planIngest(state, event, POLICY_V1, DIGEST, '2026-01-31T10:00:00.000Z', limits))).toMatchObject({ kind: 'event' });
    const refused = planIngest(state, event, POLICY_V1, DIGEST, '2026-01-31T23:59:59.999Z', limits);
    expect(refused).toMatchObject({ ok: false, code: 'quota_exceeded', retryAfterSeconds: 1234 });
    expect(state.nextEventId).toBe(3);
    expect(applied(state, planIngest(state, event, POLICY_V1, DIGEST, '2026-02-01T00:00:00.000Z', limits))).toMatchObject({ kind: 'event' });
    expect(applied(state, planIngest(state, event, POLICY_V1, DIGEST, '2026-02-01T00:00:00.000Z', NO_LIMITS))).toMatchObject({ kind: 'event' });
  });

  it('refuses a registration past the active agents and going public past the public agents', () => {
    const state = emptyOrgState();
    const reg = (id: string) => applied(state, planRegister(state, { agent_id: id, name: id, kind: 'production', observed: true }, 't', limits));
    expect(reg('a')).toMatchObject({ kind: 'agent' });
    expect(reg('b')).toMatchObject({ kind: 'agent' });
    expect(reg('c')).toMatchObject({ ok: false, code: 'plan_limit' });
    expect(applied(state, planUpdate(state, 'a', { public: true }, 't', limits))).toMatchObject({ kind: 'agent' });
    expect(applied(state, planUpdate(state, 'a', { public: true }, 't', limits))).toMatchObject({ kind: 'agent' }); // already public: no new place taken
    expect(planUpdate(state, 'b', { public: true }, 't', limits)).toMatchObject({ ok: false, code: 'plan_limit' });
    expect(applied(state, planUpdate(state, 'b', { name: 'B' }, 't', limits))).toMatchObject({ kind: 'agent' });
  });

  it('refuses exports past the monthly quota in the writer, so concurrent requests cannot pass it', () => {
    const state = emptyOrgState();
    const body = { manifest_sha256: 'x', since_seq: 0, until_seq: 1, files: [], agents: null };
    expect(applied(state, planExport(state, body, '2026-01-31T10:00:00.000Z', limits))).toMatchObject({ kind: 'export' });
    expect(planExport(state, body, '2026-01-31T10:00:00.001Z', limits)).toMatchObject({ ok: false, code: 'quota_exceeded', retryAfterSeconds: 1234 });
    expect(applied(state, planExport(state, body, '2026-02-01T00:00:00.000Z', limits))).toMatchObject({ kind: 'export' });
  });
});
