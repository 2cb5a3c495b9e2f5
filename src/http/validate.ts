import type { z } from 'zod';
import { VigilError } from '../errors.js';

/** Parses a value with a zod schema; a failure is a 400 whose details name each bad field path. */
export function validate<S extends z.ZodType>(schema: S, value: unknown, what = 'body'): z.infer<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const details = result.error.issues.map((issue) => {
    const path = issue.path.map(String).join('.');
    const unknownKeys = issue.code === 'unrecognized_keys' ? issue.keys : [];
    return {
      path: unknownKeys.length > 0 ? unknownKeys.map((k) => (path === '' ? k : `${path}.${k}`)).join(',') : path === '' ? what : path,
      message: issue.message,
    };
  });
  throw new VigilError('validation_failed', `invalid ${what}: ${details.map((d) => d.path).join(', ')}`, details);
}

/** An integer query or path parameter from min to max; `fallback` when absent; null when malformed. */
export function parseIntParam(value: string | null | undefined, fallback: number, min: number, max: number): number | null {
  if (value === null || value === undefined) return fallback;
  if (!/^\d{1,15}$/.test(value)) return null;
  const n = Number(value);
  return n >= min && n <= max ? n : null;
}

/** An integer query parameter, or a 400 naming it. */
export function queryInt(query: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const n = parseIntParam(query.get(name), fallback, min, max);
  if (n === null) {
    const message = `an integer from ${min} to ${max}`;
    throw new VigilError('validation_failed', `invalid query: ${name}`, [{ path: name, message }]);
  }
  return n;
}
