import { errorResponse } from '../errors.js';
import type { Logger } from '../../log.js';
import type { Route, RouteContext, RouteResult } from '../router.js';
import { publicRoute, type PublicGate } from './public.js';

/** Where a public log read is answered: here on the org's owner, else by the owner (cluster mode's KeyedReads). */
export interface LogReads {
  logRead(route: Route, ctx: RouteContext): Promise<RouteResult>;
}

/**
 * A public GET of one org's log (`:org`) that reads the org's Merkle tree. In cluster mode only the
 * org's owner is sure to hold that tree whole (a node that does not own the org holds a stale copy
 * of it, or none), so the node asked admits the request (rate limit, no key, CORS: its own gate's
 * headers) and the answer is the owner's, through `reads`; embedded mode (no `reads`) answers here.
 * `answer` gives the answer less the gate's headers, its errors as answers (`answered`); `here`, an
 * answer the node asked gives itself from what every node holds, sparing the hop (or null).
 */
export function logRoute(
  path: string,
  gate: PublicGate,
  reads: LogReads | undefined,
  here: (ctx: RouteContext) => RouteResult | null,
  answer: (ctx: RouteContext) => RouteResult,
  log: Logger,
  options: { url?: boolean } = {},
): Route {
  const route: Route = publicRoute(
    path,
    gate,
    (ctx, headers) => {
      if (reads === undefined) return gated(headers, answer(ctx));
      const local = here(ctx);
      if (local !== null) return gated(headers, local);
      return reads.logRead(route, ctx).then(
        (result) => gated(headers, result),
        (error: unknown) => gated(headers, refusal(error, log)),
      );
    },
    options,
  );
  route.owner = answer;
  return route;
}

/** What `read` answers, or its error as an answer (never cached): a public answer's errors carry the gate's headers too. */
export function answered(log: Logger, read: () => RouteResult): RouteResult {
  try {
    return read();
  } catch (error) {
    return refusal(error, log);
  }
}

function refusal(error: unknown, log: Logger): RouteResult {
  const refused = errorResponse(error, log);
  return { status: refused.status, text: refused.body, contentType: 'application/json', headers: { 'cache-control': 'no-store', ...refused.headers } };
}

/** The answer with the gate's headers (CORS, rate limit) before its own: a page on another origin reads them. */
function gated(headers: Record<string, string>, result: RouteResult): RouteResult {
  return { ...result, headers: { ...headers, ...result.headers } };
}
