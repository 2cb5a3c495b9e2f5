import { describe, expect, it } from 'vitest';
import { planIngest, type PlannedReview } from '../../src/domain/org-decide.js';
import { applyAgentRecord, applyEventRecord, emptyOrgState, type OrgState } from '../../src/domain/org-state.js';
import { applyReviewRecord, planReview } from '../../src/domain/org-reviews.js';
import { POLICY_V1, policyDigest } from '../../src/domain/policy.js';
import type { EventRecordBody } from '../../src/domain/records.js';
import type { IngestEventBody } from '../../src/domain/schemas.js';
import { applied } from '../support/decide.js';

const DIGEST = policyDigest(POLICY_V1);
const severe: IngestEventBody = {
  agent_id: 'a',
  event_type: 'monitoring_state_change',
  payload: { monitoring: 'off' },
  dti: 0.99,
  source: 'self',
  actor: null,
};
const clean: IngestEventBody = { ...severe, event_type: 'output_generated', payload: {}, dti: null };

/** An org with agent `a` driven into collapse; returns the state and every planned event body. */
function collapsed(): { state: OrgState; bodies: EventRecordBody[] } {
  const state = emptyOrgState();
  applyAgentRecord(state, { agent_id: 'a', name: 'A', kind: 'production', observed: true }, 't');
  const bodies: EventRecordBody[] = [];
  for (let i = 0; i < 20 && state.agents.get('a')!.scoring.gate !== 'collapse'; i++) {
    const planned = applied(state, planIngest(state, severe, POLICY_V1, DIGEST));
    if ('ok' in planned) throw new Error(planned.message);
    bodies.push(planned.body);
  }
  expect(state.agents.get('a')!.scoring.gate).toBe('collapse');
  return { state, bodies };
}

describe('review rules', () => {
  it('holds every action the gate did not pass, and refuses unknown or passed actions', () => {
    const state = emptyOrgState();
    applyAgentRecord(state, { agent_id: 'a', name: 'A', kind: 'production', observed: true }, 't');
    const pass = applied(state, planIngest(state, clean, POLICY_V1, DIGEST));
    expect(pass).toMatchObject({ result: { gate_status: 'pass' } });
    expect(state.held.size).toBe(0);
    expect(planReview(state, 1, { outcome: 'released', note: '' }, 'r', POLICY_V1, 't')).toMatchObject({ ok: false, code: 'not_found' });
    expect(planReview(state, 99, { outcome: 'released', note: '' }, 'r', POLICY_V1, 't')).toMatchObject({ ok: false, code: 'not_found' });
    const held = applied(state, planIngest(state, severe, POLICY_V1, DIGEST));
    expect(held).toMatchObject({ result: { requires_human_review: true } });
    expect(state.held.get(2)).toEqual({ agentId: 'a', gate: (held as { result: { gate_status: string } }).result.gate_status, outcome: null, risky: true });
  });

  it('release lifts a collapse to pass (BII raised to the pass line); a second decision is a conflict', () => {
    const { state, bodies } = collapsed();
    const last = Number(bodies.at(-1)!.action_id);
    expect(state.agents.get('a')!.scoring.bii).toBeLessThan(POLICY_V1.thresholds.alert);
    const planned = applied(state, planReview(state, last, { outcome: 'released', note: 'false alarm' }, 'alice', POLICY_V1, 'now'));
    const pass = POLICY_V1.thresholds.pass;
    expect(planned).toMatchObject({ kind: 'review', agentId: 'a', body: { action_id: last, outcome: 'released', held_gate: 'collapse', gate_status: 'pass', bii: pass, reviewer: 'alice', note: 'false alarm' } });
    expect(state.agents.get('a')!.scoring.gate).toBe('pass');
    expect(state.agents.get('a')!.scoring.bii).toBe(pass);
    expect(planReview(state, last, { outcome: 'rejected', note: '' }, 'bob', POLICY_V1, 'now')).toMatchObject({ ok: false, code: 'conflict' });
    // The collapse no longer sticks: clean behaviour now scores by the thresholds again.
    expect(applied(state, planIngest(state, clean, POLICY_V1, DIGEST))).toMatchObject({ result: { gate_status: 'pass' } });
  });

  it('reject and escalate leave a collapse in place; an escalated action can still be decided', () => {
    const { state, bodies } = collapsed();
    const last = Number(bodies.at(-1)!.action_id);
    expect(applied(state, planReview(state, last, { outcome: 'escalated', note: 'ask security' }, 'r', POLICY_V1, 't'))).toMatchObject({ body: { gate_status: 'collapse' } });
    expect(state.held.get(last)!.outcome).toBe('escalated');
    expect(applied(state, planReview(state, last, { outcome: 'rejected', note: 'confirmed' }, 'r', POLICY_V1, 't'))).toMatchObject({ body: { outcome: 'rejected', gate_status: 'collapse' } });
    expect(state.agents.get('a')!.scoring.gate).toBe('collapse');
    expect(applied(state, planIngest(state, clean, POLICY_V1, DIGEST))).toMatchObject({ result: { gate_status: 'collapse' } });
  });

  it('a replay of the recorded bodies rebuilds the same held actions and gate', () => {
    const { state, bodies } = collapsed();
    const first = Number(bodies[0]!.action_id);
    const last = Number(bodies.at(-1)!.action_id);
    const reviews = [
      applied(state, planReview(state, first, { outcome: 'rejected', note: '' }, 'r', POLICY_V1, 't')),
      applied(state, planReview(state, last, { outcome: 'released', note: '' }, 'r', POLICY_V1, 't')),
    ].map((p) => (p as PlannedReview).body);
    const replay = emptyOrgState();
    applyAgentRecord(replay, { agent_id: 'a', name: 'A', kind: 'production', observed: true }, 't');
    for (const body of bodies) applyEventRecord(replay, 'a', body, POLICY_V1);
    for (const body of reviews) applyReviewRecord(replay, 'a', body);
    expect([...replay.held]).toEqual([...state.held]);
    expect([...replay.closed]).toEqual([...state.closed]);
    expect(state.closed.size).toBe(2);
    expect(replay.agents.get('a')!.scoring.gate).toBe(state.agents.get('a')!.scoring.gate);
    expect(replay.agents.get('a')!.scoring.bii).toBe(state.agents.get('a')!.scoring.bii);
  });
});
