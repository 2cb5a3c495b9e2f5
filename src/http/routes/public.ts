import type { PublicRecords, Rendered } from '../../actors/public-records.js';
import { VigilError } from '../../errors.js';
import type { AppDeps } from '../deps.js';
import { errorResponse } from '../errors.js';
import { RateLimiter } from '../rate-limit.js';
import type { Route, RouteContext, RouteResult } from '../router.js';
import { parseIntParam } from '../validate.js';

/** One answer for every reason a public record is not shown, byte for byte. */
export const PUBLIC_NOT_FOUND = JSON.stringify({ error: { code: 'not_found', message: 'no public agent record here' } });

const EXPOSE = 'ETag, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After';
const CORS = { 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSE };
const NO_STORE = { 'cache-control': 'no-store' };
/** All a public route reads: a key (to refuse it) and the cache validator. */
export const PUBLIC_HEADERS: readonly string[] = ['authorization', 'if-none-match'];

export interface PublicGate {
  /** Rate limit, no-key rule and shared headers for every public answer; null when it may proceed. */
  admit(ctx: RouteContext): { headers: Record<string, string>; refusal: RouteResult | null };
}

/** The rate limiter and rules shared by the public JSON routes and the human page. */
export function publicGate(deps: AppDeps): PublicGate {
  const limiter = new RateLimiter(deps.config.publicRateLimitPerMinute, 60_000, 100_000);
  return {
    admit(ctx) {
      const decision = limiter.take(ctx.ip, deps.now());
      const headers: Record<string, string> = {
        'access-control-allow-origin': '*',
        'access-control-expose-headers': EXPOSE,
        'x-ratelimit-limit': String(decision.limit),
        'x-ratelimit-remaining': String(decision.remaining),
        'x-ratelimit-reset': String(decision.resetSeconds),
      };
      if (!decision.allowed) {
        const refused = errorResponse(new VigilError('rate_limited', 'too many public reads from this address', undefined, { retryAfterSeconds: decision.resetSeconds }), deps.log);
        return { headers, refusal: { status: 429, text: refused.body, contentType: 'application/json', headers: { ...headers, ...NO_STORE, ...refused.headers } } };
      }
      if (ctx.headers.authorization !== undefined) {
        const refused = errorResponse(
          new VigilError('bad_request', 'public routes take no key: do not send Authorization to a cacheable public route', [
            { path: 'headers.authorization', message: 'must be absent' },
          ]),
          deps.log,
        );
        return { headers, refusal: { status: 400, text: refused.body, contentType: 'application/json', headers: { ...headers, ...NO_STORE } } };
      }
      return { headers, refusal: null };
    },
  };
}

function rendered(ctx: RouteContext, found: Rendered | undefined, headers: Record<string, string>): RouteResult {
  headers['cache-control'] = 'public, max-age=60';
  if (found === undefined) return { status: 404, text: PUBLIC_NOT_FOUND, contentType: 'application/json', headers };
  headers.etag = found.etag;
  if (ctx.headers['if-none-match'] === found.etag) return { status: 304, text: '', contentType: 'application/json', headers };
  return { text: found.json, contentType: 'application/json', headers };
}

/**
 * A GET route under the public rules: no key, the shared rate limit and headers; the handler
 * gets the headers to answer with, and is not called for a refused request.
 */
export function publicRoute(
  path: string,
  gate: PublicGate,
  handler: (ctx: RouteContext, headers: Record<string, string>) => RouteResult | Promise<RouteResult>,
  options: { url?: boolean } = {},
): Route {
  return {
    method: 'get',
    path,
    auth: 'none',
    headers: PUBLIC_HEADERS,
    ip: true,
    url: options.url === true,
    handler: (ctx) => {
      const { headers, refusal } = gate.admit(ctx);
      return refusal ?? handler(ctx, headers);
    },
  };
}

/** GET /public/agents/{org}/{agent_id} and GET /public/agents/{org}: no key, from memory. */
export function publicRoutes(deps: AppDeps, records: PublicRecords, gate: PublicGate): Route[] {
  const preflight: Route['handler'] = () => ({
    status: 204,
    text: '',
    contentType: 'text/plain',
    headers: {
      ...CORS,
      'access-control-allow-methods': 'GET, OPTIONS',
      'access-control-allow-headers': 'If-None-Match, Content-Type',
      'access-control-max-age': '86400',
    },
  });
  return [
    // No format check on the ids: anything that is not a listed agent is simply not found.
    publicRoute('/public/agents/:org/:agent_id', gate, (ctx, headers) =>
      rendered(ctx, records.recordJson(ctx.params.org ?? '', ctx.params.agent_id ?? ''), headers),
    ),
    publicRoute('/public/agents/:org', gate, (ctx, headers) => {
      const limit = parseIntParam(ctx.query.get('limit'), 50, 1, 100);
      const offset = parseIntParam(ctx.query.get('offset'), 0, 0, 1e9);
      if (limit === null || offset === null) {
        const details = [
          ...(limit === null ? [{ path: 'limit', message: 'an integer from 1 to 100' }] : []),
          ...(offset === null ? [{ path: 'offset', message: 'an integer of 0 or more' }] : []),
        ];
        const refused = errorResponse(new VigilError('validation_failed', 'invalid query', details), deps.log);
        return { status: 400, text: refused.body, contentType: 'application/json', headers: { ...headers, ...NO_STORE } };
      }
      return rendered(ctx, records.listJson(ctx.params.org ?? '', limit, offset), headers);
    }),
    { method: 'options', path: '/public/agents/:org/:agent_id', auth: 'none', handler: preflight },
    { method: 'options', path: '/public/agents/:org', auth: 'none', handler: preflight },
  ];
}
