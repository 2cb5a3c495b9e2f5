import { canonicalize } from '../domain/jcs.js';
import { sha256 } from '../domain/ledger.js';
import { DIMENSIONS, tierOf, type Dimension, type Rubric, type Tier } from './rubric.js';
import type { ScoreRecord } from './schemas.js';

/**
 * Record scoring, a pure function of (record, rubric, today). Each dimension is a number in [0, 1]
 * (four decimals); the score is round(100 × Σ weight × dimension). Every rule only ever lowers its
 * dimension, so a record made worse in any one aspect never scores higher. README "Record scoring"
 * states the rules in plain words.
 */

export interface ProvenanceDimension {
  score: number;
  source: string;
  vintage: string;
}

export type Dimensions = { provenance: ProvenanceDimension } & Record<Exclude<Dimension, 'provenance'>, number>;

/** Why a dimension lost value; `deduction` is the score points (of 100) it cost, two decimals (0 when tiny). */
export interface ScoreFlag {
  dimension: Dimension;
  code: string;
  message: string;
  deduction: number;
}

/** The 2.11 sidecar without its `sidecar_id` (random, chosen by the caller). */
export interface RecordScore {
  record_id: string;
  score: number;
  tier: Tier;
  dimensions: Dimensions;
  flags: ScoreFlag[];
  /** `sha256:` + hex SHA-256 of JCS({record, weights, rubric_version}). */
  audit_hash: string;
  applied_weights: Record<Dimension, number>;
  rubric_version: string;
  /** The UTC day the recency was measured against. */
  scored_on: string;
}

interface Loss {
  code: string;
  message: string;
  /** Share of the dimension lost, in [0, 1]. */
  loss: number;
}

interface Evaluated {
  value: number;
  losses: Loss[];
}

/** `today` is a UTC day, YYYY-MM-DD. */
export function scoreRecord(record: ScoreRecord, rubric: Rubric, today: string): RecordScore {
  const evaluated: Record<Dimension, Evaluated> = {
    provenance: provenance(record, rubric),
    consent: consent(record, rubric, today),
    recency: recency(record, rubric, today),
    quality: quality(record, rubric),
    concordance: ratio(record.sources ?? [], (s) => s.agrees, rubric.concordance.sources_for_full, CONCORDANCE),
    validation: ratio(record.checks ?? [], (c) => c.passed, rubric.validation.checks_for_full, VALIDATION),
    breadth: breadth(record, rubric),
    stability: stability(record, rubric),
  };
  const weights = { ...rubric.weights };
  let total = 0;
  const flags: ScoreFlag[] = [];
  const values = {} as Record<Dimension, number>;
  for (const dimension of DIMENSIONS) {
    const { value, losses } = evaluated[dimension];
    values[dimension] = round(clamp01(value), 4);
    total += weights[dimension] * values[dimension];
    for (const { code, message, loss } of losses) {
      if (loss > 0) flags.push({ dimension, code, message, deduction: round(100 * weights[dimension] * loss, 2) });
    }
  }
  const score = Math.min(100, Math.max(0, Math.round(100 * total)));
  const { provenance: provenanceScore, ...rest } = values;
  return {
    record_id: record.record_id,
    score,
    tier: tierOf(score, rubric),
    dimensions: { provenance: { score: provenanceScore, source: record.source, vintage: record.vintage }, ...rest },
    flags,
    audit_hash: auditHash(record, weights, rubric.rubric_version),
    applied_weights: weights,
    rubric_version: rubric.rubric_version,
    scored_on: today,
  };
}

export function auditHash(record: ScoreRecord, weights: Record<Dimension, number>, rubricVersion: string): string {
  return 'sha256:' + sha256(canonicalize({ record, weights, rubric_version: rubricVersion })).toString('hex');
}

function provenance(record: ScoreRecord, rubric: Rubric): Evaluated {
  const losses: Loss[] = [];
  if (isMissing(record.source, rubric)) {
    losses.push({ code: 'source_unknown', message: `source ${JSON.stringify(record.source)} names no origin`, loss: rubric.provenance.unknown_source_loss });
  }
  if ((record.history ?? []).length === 0) {
    losses.push({ code: 'no_custody_trail', message: 'no history: nothing shows where this version came from', loss: rubric.provenance.no_history_loss });
  }
  return { value: 1 - losses.reduce((sum, l) => sum + l.loss, 0), losses };
}

function consent(record: ScoreRecord, rubric: Rubric, today: string): Evaluated {
  const c = record.consent;
  if (c === undefined) return single(rubric.consent.missing, 'consent_missing', 'no consent given for this record');
  if (c.status === 'revoked') return single(0, 'consent_revoked', 'consent was revoked');
  if (c.status === 'expired') return single(0, 'consent_expired', 'consent has expired');
  const losses: Loss[] = [];
  let value = 1;
  const apply = (factor: number, code: string, message: string): void => {
    losses.push({ code, message, loss: value * (1 - factor) });
    value *= factor;
  };
  if (c.status === 'pending') apply(rubric.consent.pending, 'consent_pending', 'consent is pending, not granted');
  if (c.scope === undefined) apply(rubric.consent.no_scope_factor, 'consent_scope_missing', 'consent does not say what it covers');
  if (c.expires !== undefined && c.expires < today) apply(0, 'consent_expired', `consent expired on ${c.expires}`);
  return { value, losses };
}

function recency(record: ScoreRecord, rubric: Rubric, today: string): Evaluated {
  const age = Math.max(0, daysBetween(record.vintage, today));
  const { grace_days, half_life_days } = rubric.recency;
  if (age <= grace_days) return { value: 1, losses: [] };
  const value = 0.5 ** ((age - grace_days) / half_life_days);
  return single(value, 'stale', `vintage ${record.vintage} is ${age} days old (full marks up to ${grace_days} days, then half every ${half_life_days})`);
}

function quality(record: ScoreRecord, rubric: Rubric): Evaluated {
  const names = Object.keys(record.fields);
  if (names.length === 0) return single(0, 'no_fields', 'the record has no fields');
  const empty = names.filter((name) => isEmptyValue(record.fields[name], rubric));
  if (empty.length === 0) return { value: 1, losses: [] };
  const loss = empty.length / names.length;
  return single(1 - loss, 'empty_fields', `${empty.length} of ${names.length} fields empty: ${list(empty)}`);
}

function breadth(record: ScoreRecord, rubric: Rubric): Evaluated {
  const filled = Object.values(record.fields).filter((v) => !isEmptyValue(v, rubric)).length;
  const full = rubric.breadth.fields_for_full;
  if (filled >= full) return { value: 1, losses: [] };
  return single(filled / full, 'narrow', `${filled} non-empty fields; ${full} for full marks`);
}

interface RatioWords {
  badCode: string;
  bad: (names: string[]) => string;
  fewCode: string;
  few: (n: number, full: number) => string;
}

const CONCORDANCE: RatioWords = {
  badCode: 'source_disagrees',
  bad: (names) => `${names.length} source(s) disagree: ${list(names)}`,
  fewCode: 'few_sources',
  few: (n, full) => `${n} corroborating source(s) given; ${full} agreeing for full marks`,
};

const VALIDATION: RatioWords = {
  badCode: 'check_failed',
  bad: (names) => `${names.length} check(s) failed: ${list(names)}`,
  fewCode: 'few_checks',
  few: (n, full) => `${n} check(s) reported; ${full} passing for full marks`,
};

/** good / max(total, full): failures and missing evidence each cost their share. */
function ratio<T extends { name: string }>(items: readonly T[], good: (item: T) => boolean, full: number, words: RatioWords): Evaluated {
  const denominator = Math.max(items.length, full);
  const bad = items.filter((item) => !good(item)).map((item) => item.name);
  const losses: Loss[] = [];
  if (bad.length > 0) losses.push({ code: words.badCode, message: words.bad(bad), loss: bad.length / denominator });
  if (items.length < full) losses.push({ code: words.fewCode, message: words.few(items.length, full), loss: (full - items.length) / denominator });
  return { value: (items.length - bad.length) / denominator, losses };
}

/** Changes between consecutive versions (in time order) cost a factor each; a return to an earlier version costs more. */
function stability(record: ScoreRecord, rubric: Rubric): Evaluated {
  const history = record.history ?? [];
  if (history.length === 0) return single(rubric.stability.no_history, 'no_history', 'no history: stability unknown');
  const ordered = history
    .map((entry, index) => ({ hash: entry.hash, time: Date.parse(entry.at), index }))
    .sort((a, b) => a.time - b.time || a.index - b.index);
  let changes = 0;
  let reverts = 0;
  const seen = new Set<string>([ordered[0]!.hash]);
  for (let i = 1; i < ordered.length; i++) {
    const { hash } = ordered[i]!;
    if (hash === ordered[i - 1]!.hash) continue;
    changes++;
    if (seen.has(hash)) reverts++;
    seen.add(hash);
  }
  const afterChanges = rubric.stability.change_factor ** changes;
  const value = afterChanges * rubric.stability.revert_factor ** reverts;
  const losses: Loss[] = [];
  if (changes > 0) losses.push({ code: 'revised', message: `${changes} change(s) across ${history.length} history entries`, loss: 1 - afterChanges });
  if (reverts > 0) losses.push({ code: 'reverted', message: `${reverts} change(s) back to an earlier version`, loss: afterChanges - value });
  return { value, losses };
}

function single(value: number, code: string, message: string): Evaluated {
  return { value, losses: [{ code, message, loss: 1 - value }] };
}

function isMissing(text: string, rubric: Rubric): boolean {
  return rubric.missing_values.includes(text.trim().toLowerCase());
}

/** null, a missing-value word, an empty array or object. Numbers and booleans always carry a value. */
function isEmptyValue(value: unknown, rubric: Rubric): boolean {
  if (value === null || value === undefined) return true;
  if (typeof value === 'string') return isMissing(value, rubric);
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') return Object.keys(value).length === 0;
  return false;
}

const DAY_MS = 86_400_000;

function daysBetween(from: string, to: string): number {
  return Math.round((Date.parse(to) - Date.parse(from)) / DAY_MS);
}

function list(names: readonly string[], max = 5): string {
  const shown = names.slice(0, max).join(', ');
  return names.length > max ? `${shown} and ${names.length - max} more` : shown;
}

function clamp01(x: number): number {
  return x < 0 ? 0 : x > 1 ? 1 : x;
}

function round(x: number, decimals: number): number {
  const f = 10 ** decimals;
  return Math.round(x * f) / f;
}
