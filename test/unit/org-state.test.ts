import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { canonicalize } from '../../src/domain/jcs.js';
import { planIngest, planRegister, planUpdate } from '../../src/domain/org-decide.js';
import { applyAgentRecord, applyEventRecord, emptyOrgState } from '../../src/domain/org-state.js';
import { POLICY_V1, policyDigest } from '../../src/domain/policy.js';
import { eventBodyJson, type EventRecordBody } from '../../src/domain/records.js';
import type { IngestEventBody } from '../../src/domain/schemas.js';
import { applied } from '../support/decide.js';

const DIGEST = policyDigest(POLICY_V1);
const event = (agent_id: string, dti: number | null = null): IngestEventBody => ({
  agent_id,
  event_type: 'output_generated',
  payload: {},
  dti,
  source: 'self',
  actor: null,
});

describe('org state rules', () => {
  it('refuses a duplicate registration as a value', () => {
    const state = emptyOrgState();
    const first = applied(state, planRegister(state, { agent_id: 'a', name: 'A', kind: 'production', observed: true }, 't'));
    expect('ok' in first).toBe(false);
    expect(planRegister(state, { agent_id: 'a', name: 'A', kind: 'production', observed: true }, 't')).toMatchObject({ ok: false, code: 'conflict' });
  });

  it('refuses events for unknown agents (not_found) and retired agents (conflict)', () => {
    const state = emptyOrgState();
    expect(planIngest(state, event('ghost'), POLICY_V1, DIGEST)).toMatchObject({ ok: false, code: 'not_found' });
    applyAgentRecord(state, { agent_id: 'old', name: 'Old', kind: 'production', observed: true }, 't');
    expect(applied(state, planUpdate(state, 'old', { is_active: false }, 't2'))).toMatchObject({ kind: 'agent', body: { action: 'update', changes: { is_active: false } } });
    expect(planIngest(state, event('old'), POLICY_V1, DIGEST)).toMatchObject({ ok: false, code: 'conflict' });
    expect(planUpdate(state, 'old', { is_active: true }, 't3')).toMatchObject({ ok: false, code: 'conflict' });
    expect(planUpdate(state, 'ghost', { public: true }, 't3')).toMatchObject({ ok: false, code: 'not_found' });
    expect(state.nextEventId).toBe(1);
  });

  it('numbers events per org and rebuilds the same state from the recorded bodies', () => {
    const live = emptyOrgState();
    applied(live, planRegister(live, { agent_id: 'a', name: 'A', kind: 'production', observed: true }, 't'));
    const bodies: EventRecordBody[] = [];
    for (const dti of [0.1, 0.99, 0.5, null]) {
      const planned = applied(live, planIngest(live, event('a', dti), POLICY_V1, DIGEST));
      if ('ok' in planned) throw new Error('refused');
      bodies.push(planned.body);
    }
    expect(bodies.map((b) => b.event_id)).toEqual([1, 2, 3, 4]);
    const replayed = emptyOrgState();
    applyAgentRecord(replayed, { agent_id: 'a', name: 'A', kind: 'production', observed: true }, 't');
    for (const body of bodies) applyEventRecord(replayed, 'a', body, POLICY_V1);
    expect(replayed.nextEventId).toBe(5);
    expect(replayed.agents.get('a')!.scoring).toEqual(live.agents.get('a')!.scoring);
  });
});

describe('eventBodyJson', () => {
  it('equals the generic RFC 8785 canonicalization for any event body', () => {
    const finite = fc.double({ noNaN: true, noDefaultInfinity: true });
    fc.assert(
      fc.property(
        fc.record({
          event_id: fc.nat(),
          action_id: fc.nat(),
          event_type: fc.string(),
          source: fc.string(),
          actor: fc.option(fc.string(), { nil: null }),
          dti: fc.option(finite, { nil: null }),
          payload: fc.dictionary(fc.string(), fc.jsonValue()),
          gate_status: fc.string(),
          bii: finite,
          composite_trust: finite,
          reason: fc.string({ unit: 'grapheme' }),
          requires_human_review: fc.boolean(),
          policy_digest: fc.string(),
          observed: fc.boolean(),
          idempotency_key: fc.option(fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/), { nil: undefined }),
        }),
        (raw) => {
          const { idempotency_key, ...rest } = raw;
          const body = idempotency_key === undefined ? rest : { ...rest, idempotency_key };
          return eventBodyJson(body) === canonicalize(body);
        },
      ),
      { numRuns: 500 },
    );
  });
});
