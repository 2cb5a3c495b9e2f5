/**
 * The record-scoring rubric is data. `rubric_version` names one exact set of weights, tiers and rule
 * parameters; the audit hash of every sidecar commits to it, so any change here needs a new version.
 * README "Record scoring" gives the reasons for each value.
 */
export const DIMENSIONS = [
  'provenance',
  'consent',
  'recency',
  'quality',
  'concordance',
  'validation',
  'breadth',
  'stability',
] as const;
export type Dimension = (typeof DIMENSIONS)[number];

export const TIERS = ['gold', 'silver', 'bronze', 'unrated'] as const;
export type Tier = (typeof TIERS)[number];

export interface Rubric {
  readonly rubric_version: string;
  /** Per dimension, summing to 1. */
  readonly weights: Readonly<Record<Dimension, number>>;
  /** Lowest score of each tier, best first; a score below every one is `unrated`. */
  readonly tiers: readonly { readonly tier: Exclude<Tier, 'unrated'>; readonly min_score: number }[];
  /** Values that mean "missing" (compared trimmed and lower-cased): an empty field, an unnamed source. */
  readonly missing_values: readonly string[];
  readonly provenance: { readonly unknown_source_loss: number; readonly no_history_loss: number };
  readonly consent: {
    readonly granted: number;
    readonly pending: number;
    /** No consent given in the record at all. */
    readonly missing: number;
    /** Factor when a granted or pending consent does not say what it covers. */
    readonly no_scope_factor: number;
  };
  readonly recency: { readonly grace_days: number; readonly half_life_days: number };
  /** Independent sources that must agree for full concordance. */
  readonly concordance: { readonly sources_for_full: number };
  /** Checks that must pass for full validation. */
  readonly validation: { readonly checks_for_full: number };
  /** Non-empty fields for full breadth. */
  readonly breadth: { readonly fields_for_full: number };
  readonly stability: { readonly no_history: number; readonly change_factor: number; readonly revert_factor: number };
}

export const RUBRIC_V1: Rubric = {
  rubric_version: 'record-rubric-v1',
  weights: {
    provenance: 0.15,
    consent: 0.2,
    recency: 0.1,
    quality: 0.15,
    concordance: 0.12,
    validation: 0.15,
    breadth: 0.05,
    stability: 0.08,
  },
  tiers: [
    { tier: 'gold', min_score: 85 },
    { tier: 'silver', min_score: 70 },
    { tier: 'bronze', min_score: 50 },
  ],
  missing_values: ['', 'n/a', 'na', 'null', 'none', 'nil', 'unknown', 'undefined', '-', '?'],
  provenance: { unknown_source_loss: 0.6, no_history_loss: 0.4 },
  consent: { granted: 1, pending: 0.4, missing: 0.25, no_scope_factor: 0.8 },
  recency: { grace_days: 90, half_life_days: 365 },
  concordance: { sources_for_full: 2 },
  validation: { checks_for_full: 3 },
  breadth: { fields_for_full: 10 },
  stability: { no_history: 0.5, change_factor: 0.85, revert_factor: 0.75 },
};

/** The tier of an integer score under a rubric. */
export function tierOf(score: number, rubric: Rubric): Tier {
  for (const { tier, min_score } of rubric.tiers) if (score >= min_score) return tier;
  return 'unrated';
}
