import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planIngest } from '../../src/domain/org-decide.js';
import { applyAgentRecord, applyEventRecord, emptyOrgState, type OrgState } from '../../src/domain/org-state.js';
import { applyReviewRecord, planReview } from '../../src/domain/org-reviews.js';
import { POLICY_V1, policyDigest } from '../../src/domain/policy.js';
import type { EventRecordBody, ReviewRecordBody } from '../../src/domain/records.js';
import type { IngestEventBody, ReviewOutcome } from '../../src/domain/schemas.js';
import { applied } from '../support/decide.js';

/** A release vouches for the agent (issue 13, item 10): the rule of `planReview`. */
const DIGEST = policyDigest(POLICY_V1);
const PASS = POLICY_V1.thresholds.pass;
const AGENT = { agent_id: 'a', name: 'A', kind: 'production', observed: true };

const event = (event_type: IngestEventBody['event_type'], payload: Record<string, unknown> = {}, dti: number | null = null): IngestEventBody => ({
  agent_id: 'a',
  event_type,
  payload,
  dti,
  source: 'self',
  actor: null,
});
const clean = event('output_generated');
const severe = event('monitoring_state_change', { enabled: false });

/** Events of every kind of signal: clean, mild, risky and severe. */
const eventArb: fc.Arbitrary<IngestEventBody> = fc.constantFrom(
  clean,
  severe,
  event('output_generated', {}, 0.99),
  event('output_generated', {}, 0.4),
  event('config_read', { key: 'ui.theme' }),
  event('config_read', { key: 'db.password' }),
  event('config_write', { key: 'ui.theme' }),
  event('config_write', { key: 'oversight.level' }),
  event('file_operation', { operation: 'write', path: '/workspace/a.ts', workspace: '/workspace' }),
  event('file_operation', { operation: 'write', path: '/etc/passwd' }),
  event('file_operation', { operation: 'delete', path: '/var/log/app.log' }),
  event('monitoring_state_change', { enabled: true }),
);

interface Run {
  state: OrgState;
  /** Every planned record, in order, as replay would read them back. */
  records: ({ kind: 'event'; body: EventRecordBody } | { kind: 'review'; body: ReviewRecordBody })[];
}

function start(): Run {
  const state = emptyOrgState();
  applyAgentRecord(state, AGENT, 't');
  return { state, records: [] };
}

function ingest(run: Run, body: IngestEventBody) {
  const planned = applied(run.state, planIngest(run.state, body, POLICY_V1, DIGEST));
  if ('ok' in planned) throw new Error(planned.message);
  run.records.push({ kind: 'event', body: planned.body });
  return planned.result;
}

function review(run: Run, actionId: number, outcome: ReviewOutcome) {
  const planned = applied(run.state, planReview(run.state, actionId, { outcome, note: '' }, 'r', POLICY_V1, 't'));
  if ('ok' in planned) throw new Error(planned.message);
  run.records.push({ kind: 'review', body: planned.body });
  return planned.result;
}

const scoring = (run: Run) => run.state.agents.get('a')!.scoring;
const openActions = (run: Run) => [...run.state.held.keys()];
/** Open actions whose release vouches: the latest open incident, or a clean one while no incident is open. */
const vouching = (run: Run) =>
  openActions(run).filter((id) => {
    const released = run.state.held.get(id)!;
    return ![...run.state.held].some(([other, h]) => other !== id && h.risky && (other > id || !released.risky));
  });

describe('a release vouches for the agent', () => {
  it('after one severe event and its release, the next fourteen clean events pass and open no review', () => {
    const run = start();
    const held = ingest(run, severe);
    expect(held).toMatchObject({ gate_status: 'hold', requires_human_review: true });
    expect(review(run, held.action_id, 'released')).toMatchObject({ held_gate: 'hold', gate_status: 'pass', bii: PASS });
    for (let i = 0; i < 14; i++) expect(ingest(run, clean), `clean event ${i + 1}`).toMatchObject({ gate_status: 'pass', requires_human_review: false });
    expect(run.state.held.size).toBe(0);
    // A new risky signal holds it again at once.
    expect(ingest(run, severe).gate_status).not.toBe('pass');
  });

  it('a clean held event vouches only while no incident is open; an older incident never does', () => {
    const run = start();
    const first = ingest(run, severe); // an incident
    const cleanHeld = ingest(run, clean); // held only because the agent already is
    const second = ingest(run, severe); // a second incident
    const cleanAfter = ingest(run, clean);
    expect([first, cleanHeld, second, cleanAfter].map((r) => r.requires_human_review)).toEqual([true, true, true, true]);
    const before = { ...scoring(run) };
    // The second incident is open and unjudged: no release vouches, not even of a later clean event.
    expect(review(run, cleanAfter.action_id, 'released')).toMatchObject({ gate_status: before.gate, bii: before.bii });
    expect(review(run, first.action_id, 'released')).toMatchObject({ gate_status: before.gate, bii: before.bii });
    expect(scoring(run)).toEqual(before);
    // Rejecting the second incident judges it (and changes no score)…
    expect(review(run, second.action_id, 'rejected')).toMatchObject({ gate_status: before.gate, bii: before.bii });
    // …so releasing what is left, a clean event, vouches for the agent as it is now.
    expect(review(run, cleanHeld.action_id, 'released')).toMatchObject({ gate_status: 'pass', bii: PASS });
    expect(openActions(run)).toEqual([]);
    expect(ingest(run, clean).gate_status).toBe('pass');
  });

  it('releasing the last open incident vouches, with clean held events still open', () => {
    const run = start();
    const incident = ingest(run, severe);
    const cleanHeld = ingest(run, clean);
    expect(review(run, incident.action_id, 'released')).toMatchObject({ gate_status: 'pass', bii: PASS });
    expect(openActions(run)).toEqual([cleanHeld.action_id]);
  });

  it('a release of an agent already at pass keeps its BII; a BII above the pass line is kept', () => {
    const run = start();
    const held = ingest(run, severe);
    let last;
    do last = ingest(run, clean);
    while (last.bii < PASS);
    expect(last.gate_status).toBe('pass'); // recovered by itself
    expect(review(run, held.action_id, 'released')).toMatchObject({ gate_status: 'pass', bii: last.bii });
  });

  it('property: a release with no other open incident gives pass at BII ≥ 0.75; then a clean event passes and a severe one does not', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { minLength: 1, maxLength: 40 }), fc.nat(), fc.boolean(), (events, pick, thenSevere) => {
        const run = start();
        for (const e of events) ingest(run, e);
        const agent = run.state.agents.get('a')!;
        const eligible = vouching(run);
        fc.pre(eligible.length > 0);
        const before = agent.scoring.bii!;
        const result = review(run, eligible[pick % eligible.length]!, 'released');
        expect(result.gate_status).toBe('pass');
        expect(result.bii).toBe(Math.max(before, PASS));
        expect(scoring(run)).toMatchObject({ gate: 'pass', bii: result.bii });
        const next = ingest(run, thenSevere ? severe : clean);
        if (thenSevere) expect(next.gate_status).not.toBe('pass');
        else expect(next).toMatchObject({ gate_status: 'pass', requires_human_review: false });
      }),
      { numRuns: 300 },
    );
  });

  it('property: rejecting, escalating, or releasing while another incident is open changes no score', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { minLength: 1, maxLength: 40 }), fc.nat(), fc.constantFrom<ReviewOutcome>('released', 'rejected', 'escalated'), (events, pick, outcome) => {
        const run = start();
        for (const e of events) ingest(run, e);
        const agent = run.state.agents.get('a')!;
        const open = vouching(run);
        const candidates = openActions(run).filter((id) => outcome !== 'released' || !open.includes(id));
        fc.pre(candidates.length > 0);
        const before = { ...agent.scoring };
        const result = review(run, candidates[pick % candidates.length]!, outcome);
        expect([result.gate_status, result.bii]).toEqual([before.gate, before.bii]);
        expect(scoring(run)).toEqual(before);
      }),
      { numRuns: 300 },
    );
  });

  it('property: replaying the recorded events and decisions rebuilds the live state exactly', () => {
    const stepArb = fc.oneof(
      { weight: 3, arbitrary: eventArb.map((e) => ({ type: 'event' as const, e })) },
      { weight: 1, arbitrary: fc.record({ type: fc.constant('review' as const), pick: fc.nat(), outcome: fc.constantFrom<ReviewOutcome>('released', 'rejected', 'escalated') }) },
    );
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 60 }), (steps) => {
        const run = start();
        for (const step of steps) {
          if (step.type === 'event') ingest(run, step.e);
          else {
            const open = openActions(run);
            if (open.length > 0) review(run, open[step.pick % open.length]!, step.outcome);
          }
        }
        const replay = emptyOrgState();
        applyAgentRecord(replay, AGENT, 't');
        for (const r of run.records) {
          if (r.kind === 'event') applyEventRecord(replay, 'a', r.body, POLICY_V1);
          else applyReviewRecord(replay, 'a', r.body);
        }
        expect(replay).toEqual(run.state);
        // And the replayed state decides the next step as the live one does.
        const open = openActions(run);
        if (open.length > 0) {
          const live = applied(run.state, planReview(run.state, open.at(-1)!, { outcome: 'released', note: '' }, 'r', POLICY_V1, 't'));
          const again = applied(replay, planReview(replay, open.at(-1)!, { outcome: 'released', note: '' }, 'r', POLICY_V1, 't'));
          expect(again).toEqual(live);
        }
        expect(planIngest(replay, clean, POLICY_V1, DIGEST)).toEqual(planIngest(run.state, clean, POLICY_V1, DIGEST));
      }),
      { numRuns: 300 },
    );
  });
});
