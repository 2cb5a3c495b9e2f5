import { STATUS_OF } from '../../src/http/errors.js';
import type { Answer } from './send.js';

/**
 * What every answer must look like (DESIGN §4 "Errors"), as checks that return what is wrong
 * (null when nothing is), shared by the fuzz suite and the access matrices.
 */

/** A 4xx is the JSON error body `{error: {code, message, details?}}`, its code mapped to its status. */
export function errorBodyProblem(answer: Answer, options: { htmlNotFound?: boolean } = {}): string | null {
  const type = answer.headers.get('content-type') ?? '';
  if (answer.status === 404 && options.htmlNotFound === true && type.startsWith('text/html')) return null;
  if (!type.startsWith('application/json')) return `a ${answer.status} with content-type ${JSON.stringify(type)}, not application/json`;
  let parsed: any;
  try {
    parsed = JSON.parse(answer.text);
  } catch {
    return `a ${answer.status} whose body is not JSON: ${JSON.stringify(answer.text.slice(0, 200))}`;
  }
  const keys = parsed !== null && typeof parsed === 'object' ? Object.keys(parsed) : [];
  if (keys.length !== 1 || keys[0] !== 'error') return `a ${answer.status} whose body is not {error: …}: ${answer.text.slice(0, 200)}`;
  const { code, message, details, ...rest } = parsed.error ?? {};
  if (typeof code !== 'string' || !(code in STATUS_OF)) return `unknown error code ${JSON.stringify(code)}`;
  if (STATUS_OF[code as keyof typeof STATUS_OF] !== answer.status) return `error code ${code} answered with ${answer.status}, not ${STATUS_OF[code as keyof typeof STATUS_OF]}`;
  if (typeof message !== 'string' || message === '') return `error ${code} without a message`;
  if (Object.keys(rest).length > 0) return `error ${code} with unexpected members ${Object.keys(rest).join(', ')}`;
  if (details !== undefined) {
    const wellFormed = Array.isArray(details) && details.every((d: any) => typeof d?.path === 'string' && typeof d?.message === 'string');
    if (!wellFormed) return `error ${code} with malformed details ${JSON.stringify(details).slice(0, 200)}`;
  }
  if ((code === 'rate_limited' || code === 'overloaded') && answer.headers.get('retry-after') === null) return `a 429 ${code} without Retry-After`;
  return null;
}

/**
 * The only 5xx the service documents: 503 `unavailable` with Retry-After, while it starts (before
 * its routes are mounted) or when the ledger could not be written ("nothing was recorded, retry").
 */
export function isDocumented503(answer: Answer): boolean {
  if (answer.status !== 503 || answer.headers.get('retry-after') === null) return false;
  try {
    return JSON.parse(answer.text)?.error?.code === 'unavailable';
  } catch {
    return false;
  }
}

/** The error code of an answer, or null. */
export function errorCode(answer: Answer): string | null {
  try {
    const code = JSON.parse(answer.text)?.error?.code;
    return typeof code === 'string' ? code : null;
  } catch {
    return null;
  }
}
