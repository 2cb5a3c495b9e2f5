import { z } from 'zod';

/** zod schemas of the record-scoring interface's request bodies (`/api/v1`); validated once, at the edge. */

/** Nesting allowed inside `fields` values: keeps every walk over a record shallow and bounded. */
export const MAX_FIELD_DEPTH = 16;

const day = z.iso.date('a calendar date YYYY-MM-DD');
const instant = z.union([day, z.iso.datetime({ offset: true })], 'a date YYYY-MM-DD or an RFC 3339 date-time');
const label = z.string().min(1).max(200);

export const ConsentStatus = ['granted', 'pending', 'expired', 'revoked'] as const;
export type ConsentStatus = (typeof ConsentStatus)[number];

export const scoreRecordBody = z.strictObject({
  record_id: z.string().min(1).max(200),
  source: label,
  vintage: day,
  fields: z
    .record(z.string().max(200), z.unknown())
    .refine((f) => Object.keys(f).length <= 500, 'at most 500 fields')
    .refine((f) => depthWithin(f, MAX_FIELD_DEPTH), `values nest at most ${MAX_FIELD_DEPTH} levels`),
  consent: z
    .strictObject({
      status: z.enum(ConsentStatus),
      scope: z.string().min(1).max(200).optional(),
      expires: day.optional(),
    })
    .optional(),
  checks: z.array(z.strictObject({ name: label, passed: z.boolean() })).max(100).optional(),
  sources: z.array(z.strictObject({ name: label, agrees: z.boolean() })).max(100).optional(),
  history: z.array(z.strictObject({ at: instant, hash: z.string().min(1).max(200) })).max(1000).optional(),
});
/** A record as submitted for scoring. */
export type ScoreRecord = z.infer<typeof scoreRecordBody>;

export const issueKeyBody = z.strictObject({
  /** Normalised: surrounding space trimmed, lower-cased (one key per address, whatever its case). */
  email: z.string().max(254).trim().toLowerCase().pipe(z.email('an e-mail address')),
});

/** Whether no array or object inside `value` nests deeper than `max` levels (iterative: input is untrusted). */
export function depthWithin(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item !== 'object') continue;
    if (depth > max) return false;
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return true;
}
