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
