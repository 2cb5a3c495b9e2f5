import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../src/domain/jcs.js';
import { DIMENSIONS, RUBRIC_V1, TIERS } from '../../src/record-scoring/rubric.js';
import { scoreRecordBody, type ScoreRecord } from '../../src/record-scoring/schemas.js';
import { scoreRecord, type RecordScore } from '../../src/record-scoring/score.js';

const TODAY = '2025-06-01';
const DAY_MS = 86_400_000;

const dayOffset = (day: string, days: number): string => new Date(Date.parse(day) + days * DAY_MS).toISOString().slice(0, 10);

// ---- arbitraries -------------------------------------------------------------------------------

const dayArb = fc.integer({ min: 0, max: 3650 }).map((ago) => dayOffset(TODAY, -ago));
const fieldValueArb = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.string({ maxLength: 8 }),
  fc.constantFrom(null, '', 'n/a', 'Unknown', '  ', [], {}),
  fc.array(fc.integer(), { maxLength: 3 }),
);
const fieldsArb = fc.dictionary(fc.stringMatching(/^[a-z_]{1,10}$/), fieldValueArb, { maxKeys: 14 });
const consentArb = fc.option(
  fc.record(
    { status: fc.constantFrom('granted', 'pending', 'expired', 'revoked'), scope: fc.constantFrom('research', 'care'), expires: fc.integer({ min: -400, max: 400 }).map((d) => dayOffset(TODAY, d)) },
    { requiredKeys: ['status'] },
  ),
  { nil: undefined },
);
const namedArb = <K extends string>(flag: K) =>
  fc.array(fc.record({ name: fc.stringMatching(/^[a-z]{1,6}$/), [flag]: fc.boolean() }), { maxLength: 6 });
const historyArb = fc.array(fc.record({ at: dayArb, hash: fc.constantFrom('h1', 'h2', 'h3', 'h4') }), { maxLength: 6 });

const recordArb: fc.Arbitrary<ScoreRecord> = fc
  .record({
    record_id: fc.stringMatching(/^rec-[0-9]{1,4}$/),
    source: fc.constantFrom('registry-a', 'lab-feed', 'unknown', 'n/a'),
    vintage: dayArb,
    fields: fieldsArb,
    consent: consentArb,
    checks: fc.option(namedArb('passed'), { nil: undefined }),
    sources: fc.option(namedArb('agrees'), { nil: undefined }),
    history: fc.option(historyArb, { nil: undefined }),
  })
  .map((r) => JSON.parse(JSON.stringify(r)) as ScoreRecord); // drops undefined optionals, as JSON would

/** As the rubric counts a field empty: null, a missing-value word, [] or {}. */
const isEmpty = (v: unknown): boolean =>
  v === null ||
  (typeof v === 'string' && RUBRIC_V1.missing_values.includes(v.trim().toLowerCase())) ||
  (typeof v === 'object' && Object.keys(v).length === 0);

/** Each returns a copy of the record made worse in exactly one aspect (or unchanged when the aspect is absent). */
type Worsen = (r: ScoreRecord, pick: number) => ScoreRecord;
const at = <T>(items: readonly T[], pick: number): number => pick % items.length;
const WORSEN: Record<string, Worsen> = {
  revokeConsent: (r) => ({ ...r, consent: { ...(r.consent ?? { status: 'granted' }), status: 'revoked' } }),
  expireConsentStatus: (r) => (r.consent === undefined ? r : { ...r, consent: { ...r.consent, status: 'expired' } }),
  consentExpiresInPast: (r) => (r.consent === undefined ? r : { ...r, consent: { ...r.consent, expires: dayOffset(TODAY, -1) } }),
  grantedToPending: (r) => (r.consent?.status === 'granted' ? { ...r, consent: { ...r.consent, status: 'pending' } } : r),
  dropConsentScope: (r) => {
    if (r.consent === undefined) return r;
    const { scope: _scope, ...rest } = r.consent;
    return { ...r, consent: rest };
  },
  failACheck: (r, pick) => {
    const passed = (r.checks ?? []).flatMap((c, i) => (c.passed ? [i] : []));
    if (passed.length === 0) return r;
    const i = passed[at(passed, pick)]!;
    return { ...r, checks: r.checks!.map((c, j) => (j === i ? { ...c, passed: false } : c)) };
  },
  addFailedCheck: (r) => ({ ...r, checks: [...(r.checks ?? []), { name: 'extra', passed: false }] }),
  removePassedCheck: (r, pick) => {
    const passed = (r.checks ?? []).flatMap((c, i) => (c.passed ? [i] : []));
    return passed.length === 0 ? r : { ...r, checks: r.checks!.filter((_, j) => j !== passed[at(passed, pick)]) };
  },
  disagreeASource: (r, pick) => {
    const agreeing = (r.sources ?? []).flatMap((s, i) => (s.agrees ? [i] : []));
    if (agreeing.length === 0) return r;
    const i = agreeing[at(agreeing, pick)]!;
    return { ...r, sources: r.sources!.map((s, j) => (j === i ? { ...s, agrees: false } : s)) };
  },
  addDisagreeingSource: (r) => ({ ...r, sources: [...(r.sources ?? []), { name: 'other', agrees: false }] }),
  removeAgreeingSource: (r, pick) => {
    const agreeing = (r.sources ?? []).flatMap((s, i) => (s.agrees ? [i] : []));
    return agreeing.length === 0 ? r : { ...r, sources: r.sources!.filter((_, j) => j !== agreeing[at(agreeing, pick)]) };
  },
  olderVintage: (r, pick) => ({ ...r, vintage: dayOffset(r.vintage, -(1 + (pick % 2000))) }),
  emptyAField: (r, pick) => {
    const names = Object.keys(r.fields);
    return names.length === 0 ? r : { ...r, fields: { ...r.fields, [names[at(names, pick)]!]: pick % 2 === 0 ? null : '' } };
  },
  addEmptyField: (r) => ({ ...r, fields: { ...r.fields, ZZ_new_empty: null } }),
  removeAFilledField: (r, pick) => {
    const names = Object.keys(r.fields).filter((name) => !isEmpty(r.fields[name]));
    if (names.length === 0) return r;
    const { [names[at(names, pick)]!]: _gone, ...rest } = r.fields;
    return { ...r, fields: rest };
  },
  unknownSource: (r) => ({ ...r, source: 'unknown' }),
  changeHistory: (r, pick) => {
    const history = r.history ?? [];
    if (history.length === 0) return r;
    const latest = Math.max(...history.map((h) => Date.parse(h.at)));
    const last = [...history].sort((a, b) => Date.parse(a.at) - Date.parse(b.at)).at(-1)!;
    const hash = ['h1', 'h2', 'h3', 'h4', 'h5'].filter((h) => h !== last.hash)[pick % 4]!;
    return { ...r, history: [...history, { at: new Date(latest + DAY_MS).toISOString(), hash }] };
  },
};

const dimensionValues = (s: RecordScore): number[] =>
  DIMENSIONS.map((d) => (d === 'provenance' ? s.dimensions.provenance.score : s.dimensions[d]));

describe('record scoring (RUBRIC_V1)', () => {
  it('making any one aspect worse never raises the score or any dimension', () => {
    fc.assert(
      fc.property(recordArb, fc.constantFrom(...Object.keys(WORSEN)), fc.nat(), (record, op, pick) => {
        const worse = WORSEN[op]!(record, pick);
        expect(scoreRecordBody.safeParse(worse).success).toBe(true);
        const before = scoreRecord(record, RUBRIC_V1, TODAY);
        const after = scoreRecord(worse, RUBRIC_V1, TODAY);
        expect(after.score).toBeLessThanOrEqual(before.score);
        const b = dimensionValues(before);
        dimensionValues(after).forEach((v, i) => expect(v, DIMENSIONS[i]).toBeLessThanOrEqual(b[i]!));
      }),
      { numRuns: 1500 },
    );
  });

  it('keeps the score an integer 0-100, dimensions in [0, 1], the tier at its cut-off and weights summing to 1', () => {
    fc.assert(
      fc.property(recordArb, (record) => {
        const s = scoreRecord(record, RUBRIC_V1, TODAY);
        expect(Number.isInteger(s.score) && s.score >= 0 && s.score <= 100).toBe(true);
        for (const v of dimensionValues(s)) expect(v >= 0 && v <= 1).toBe(true);
        const tier = s.score >= 85 ? 'gold' : s.score >= 70 ? 'silver' : s.score >= 50 ? 'bronze' : 'unrated';
        expect(s.tier).toBe(tier);
        const weighted = DIMENSIONS.reduce((sum, d, i) => sum + s.applied_weights[d] * dimensionValues(s)[i]!, 0);
        expect(s.score).toBe(Math.round(100 * weighted));
        expect(Object.values(s.applied_weights).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
        // The flags account for every lost point (each deduction is rounded to 0.01), and every
        // dimension below 1 has a flag saying why.
        const deducted = s.flags.reduce((sum, f) => sum + f.deduction, 0);
        expect(Math.abs(deducted - (100 - s.score))).toBeLessThanOrEqual(0.51 + 0.005 * s.flags.length);
        for (const f of s.flags) expect(f.deduction).toBeGreaterThanOrEqual(0);
        DIMENSIONS.forEach((d, i) => {
          if (dimensionValues(s)[i]! < 1) expect(s.flags.some((f) => f.dimension === d), d).toBe(true);
        });
      }),
      { numRuns: 500 },
    );
  });

  it('is deterministic and its audit hash is SHA-256 of JCS({record, weights, rubric_version}), whatever the key order', () => {
    fc.assert(
      fc.property(recordArb, (record) => {
        const s = scoreRecord(record, RUBRIC_V1, TODAY);
        const reordered = Object.fromEntries(Object.entries(structuredClone(record)).reverse()) as ScoreRecord;
        expect(scoreRecord(reordered, RUBRIC_V1, TODAY)).toEqual(s);
        const expected = createHash('sha256').update(canonicalize({ record, weights: RUBRIC_V1.weights, rubric_version: RUBRIC_V1.rubric_version })).digest('hex');
        expect(s.audit_hash).toBe(`sha256:${expected}`);
      }),
      { numRuns: 200 },
    );
  });

  const good: ScoreRecord = {
    record_id: 'rec-1',
    source: 'registry-a',
    vintage: TODAY,
    fields: Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`f${i}`, i + 1])),
    consent: { status: 'granted', scope: 'research' },
    checks: [{ name: 'range', passed: true }, { name: 'units', passed: true }, { name: 'format', passed: true }],
    sources: [{ name: 'ehr', agrees: true }, { name: 'claims', agrees: true }],
    history: [{ at: '2025-05-01', hash: 'h1' }],
  };

  it('gives a complete, consented, corroborated record 100 (gold) with no flags', () => {
    const s = scoreRecord(good, RUBRIC_V1, TODAY);
    expect(s).toMatchObject({ record_id: 'rec-1', score: 100, tier: 'gold', flags: [], rubric_version: 'record-rubric-v1', scored_on: TODAY });
    expect(s.dimensions.provenance).toEqual({ score: 1, source: 'registry-a', vintage: TODAY });
  });

  it('scores a poor record low and names every cause', () => {
    const poor: ScoreRecord = {
      ...good,
      source: 'unknown',
      vintage: dayOffset(TODAY, -6 * 365),
      fields: { a: 1, b: null, c: 'n/a' },
      consent: { status: 'revoked' },
      checks: [{ name: 'range', passed: false }],
      sources: [{ name: 'ehr', agrees: false }],
      history: [{ at: '2020-01-01', hash: 'h1' }, { at: '2021-01-01', hash: 'h2' }, { at: '2022-01-01', hash: 'h1' }],
    };
    const s = scoreRecord(poor, RUBRIC_V1, TODAY);
    expect(s.tier).toBe('unrated');
    expect(s.score).toBeLessThan(25);
    const codes = s.flags.map((f) => `${f.dimension}:${f.code}`);
    for (const code of [
      'provenance:source_unknown', 'consent:consent_revoked', 'recency:stale', 'quality:empty_fields', 'concordance:source_disagrees',
      'concordance:few_sources', 'validation:check_failed', 'validation:few_checks', 'breadth:narrow', 'stability:revised', 'stability:reverted',
    ]) expect(codes).toContain(code);
    expect(s.flags.find((f) => f.code === 'empty_fields')!.message).toContain('b, c');
  });

  it('exposes the documented tier set and cut-offs', () => {
    expect(TIERS).toEqual(['gold', 'silver', 'bronze', 'unrated']);
    expect(RUBRIC_V1.tiers.map((t) => [t.tier, t.min_score])).toEqual([['gold', 85], ['silver', 70], ['bronze', 50]]);
  });
});
