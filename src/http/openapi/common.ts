import { z } from 'zod';

/**
 * What many operations share: the error statuses each kind of route can answer (by the router's
 * rules, before or around the handler), response headers, and query parameters read with
 * `queryInt` (which has no zod schema of its own: these say what it accepts).
 */

/** Any valid key of the org (401 without one); 429 past the per-key rate (VIGIL_KEY_RATE_LIMIT). */
export const KEY = [401, 429] as const;
/**
 * A route needing a scope: 403 without it. Also a route any key may call with a non-GET method
 * (an `audit:read` key only reads), or an audit route under VIGIL_STRICT_AUDIT.
 */
export const SCOPED = [401, 403, 429] as const;
/** A keyed GET: in cluster mode it first waits for this node's copy of the ledger (503 if it trails). */
export const READ = [503] as const;
/** A JSON body is read (POST, PATCH): malformed JSON or invalid fields 400, over 1 MiB 413, not JSON 415. */
export const BODY = [400, 413, 415] as const;
/** A write through the org's single writer: 429 `overloaded` (its queue is full), 503 `unavailable` or `ledger_damaged`. */
export const WRITE = [429, 503] as const;
/** A public read: 400 when a key is sent anyway, 429 past the per-address rate (VIGIL_PUBLIC_RATE_LIMIT). */
export const PUBLIC = [400, 429] as const;

/** Appended to the description of an audit read (a `key` route marked `audit`). */
export const AUDIT_READ = 'An audit read: any key of the org, an `audit:read` one too; with VIGIL_STRICT_AUDIT only an `audit:read` or `admin` key (403 otherwise).';

/** The statuses of `lists`, once each, in order. */
export function errors(...lists: (readonly number[] | number)[]): number[] {
  return [...new Set(lists.flat())].sort((a, b) => a - b);
}

/** Headers of every answer of the public read routes (JSON, pages, transparency log). */
export const PUBLIC_HEADERS: Readonly<Record<string, string>> = {
  'Access-Control-Allow-Origin': '`*`: any origin may read it in a browser',
  'X-RateLimit-Limit': 'Public reads allowed a minute from this address (VIGIL_PUBLIC_RATE_LIMIT, 60 by default)',
  'X-RateLimit-Remaining': 'Reads left in the current window',
  'X-RateLimit-Reset': 'Seconds until the window resets',
};

/** A cached public JSON answer: the headers above, its cache lifetime and its validator. */
export const CACHED_HEADERS: Readonly<Record<string, string>> = {
  ...PUBLIC_HEADERS,
  'Cache-Control': '`public, max-age=60`',
  ETag: 'A strong validator of the body (a digest of its bytes): send it back as If-None-Match for a 304',
};

/** The If-None-Match request header of the cached public reads. */
export const IF_NONE_MATCH = {
  'If-None-Match': { description: 'The ETag of an earlier answer: 304 with no body when the answer is still the same (compared as one exact value)' },
};

/** What a checkpoint answer is (GET /audit/checkpoint and its public twins). */
export const CHECKPOINT =
  'A C2SP signed note: the origin (`<host>/vigil/<org>`), the tree size and the base64 root hash on three lines, a blank line, then two signature lines `— <name> <base64 of key id and Ed25519 signature>`, one named for the origin, one for the key published at GET /public/log-key (the same key)';

/** An integer query parameter as `queryInt` reads it (digits only, from `min` to `max`). */
export function intParam(min: number, max: number, fallback: number | null, what: string) {
  const digits = z.string().regex(/^\d{1,15}$/, 'digits only');
  const range = `an integer from ${min} to ${max >= 1e6 && Number.isInteger(Math.log10(max)) ? `10^${Math.log10(max)}` : max}`;
  return fallback === null ? digits.describe(`${what}: ${range}; required`) : digits.optional().describe(`${what}: ${range}; default ${fallback}`);
}
