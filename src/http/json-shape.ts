import type { ErrorDetail } from '../errors.js';

/** Objects and arrays nested deeper than this in a request body are refused. */
export const MAX_JSON_DEPTH = 64;

/**
 * Member names refused anywhere in a body. A ledger records exactly what was sent: `__proto__`
 * cannot survive being copied into a plain object (assignment sets the prototype instead), and
 * the other two are refused with it so that no body depends on how an object was built.
 */
const PROTOTYPE_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * What JSON.parse accepts but an audit ledger cannot record faithfully: numbers that parse to
 * ±Infinity (`1e999`), nesting beyond MAX_JSON_DEPTH, prototype member names. Returns the first
 * problem with its field path (`payload.a.0`), or null. Recursion stops at the depth limit, so a
 * body nested a million levels deep costs no more than one nested 65.
 */
export function jsonShapeProblem(value: unknown): ErrorDetail | null {
  const path: string[] = [];
  const problem = check(value, path, 0);
  return problem === null ? null : { path: path.length === 0 ? 'body' : path.join('.'), message: problem };
}

/** The problem's message, with `path` left at the member it names (built only on failure). */
function check(value: unknown, path: string[], depth: number): string | null {
  if (typeof value === 'number') return Number.isFinite(value) ? null : 'number out of range (not a finite double)';
  if (typeof value !== 'object' || value === null) return null;
  if (depth >= MAX_JSON_DEPTH) return `nested deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (typeof item !== 'object' && typeof item !== 'number') continue;
      path.push(String(i));
      const problem = check(item, path, depth + 1);
      if (problem !== null) return problem;
      path.pop();
    }
    return null;
  }
  for (const key in value) {
    path.push(key);
    if (PROTOTYPE_KEYS.has(key)) return `the member name ${key} is not accepted`;
    const problem = check((value as Record<string, unknown>)[key], path, depth + 1);
    if (problem !== null) return problem;
    path.pop();
  }
  return null;
}
