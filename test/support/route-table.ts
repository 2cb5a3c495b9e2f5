import type { Auth, Route } from '../../src/http/router.js';

/**
 * What the hostile-input suites (fuzz, access matrices) know about each mounted route: the auth it
 * must have, and how to build a request that would succeed. The suites walk `runtime.routes` and
 * fail naming any route missing here, so a new route is added to this table consciously.
 */

/** Resources of one org that requests name (path params, query, body). */
export interface OrgIds {
  org: string;
  /** A registered agent, not public. */
  agent: string;
  /** A registered agent made public. */
  publicAgent: string;
  /** A held action awaiting review. */
  heldAction: number;
  /** An active webhook. */
  webhook: number;
  /** Another active webhook, the one DELETE is aimed at (so that the first stays active). */
  spareWebhook: number;
  /** An active webhook whose receiver always answers 500, and one of its deliveries, dead. */
  failingWebhook: number;
  deadDelivery: number;
  /** A key of the org that DELETE /admin/keys/{id} is aimed at (not the one the suites send). */
  spareKey: string;
  /** A studio agent in draft. */
  studioAgent: string;
  /** A deployed studio agent (a chat target). */
  chatAgent: string;
  /** The org's ledger length when seeded (export windows). */
  ledgerLength: number;
  /** A receiver URL the test controls (loopback only). */
  hookUrl: string;
}

export interface RouteRequest {
  params?: Record<string, string>;
  query?: Record<string, string>;
  /** undefined: the route takes no body. */
  body?: unknown;
}

export interface RouteCase {
  /** The auth the route must be mounted with. */
  auth: Auth;
  /** A request that succeeds for the org owning `ids`; `fresh()` gives unique names for things created. */
  request: (ids: OrgIds, fresh: () => string) => RouteRequest;
  /** The request names resources of the org (path or body): another org's key must not reach them. */
  names?: boolean;
  /** Auth `none` only: the status when a valid Vigil key is sent anyway. */
  withKey?: number;
  /** The route reads its own key (not a Vigil key): `sandbox` for the record-scoring interface. */
  ownKey?: 'sandbox' | 'metrics';
  /** Body paths whose contents are free JSON (no type to get wrong below them). */
  freeform?: string[];
  /** Answers a 404 as an HTML page (a page for humans), not as the JSON error body. */
  htmlNotFound?: boolean;
}

const today = (): string => new Date().toISOString().slice(0, 10);
const month = (): string => new Date().toISOString().slice(0, 7);

/** A record the scoring interface accepts (no personal health information). */
export const scoreRecord = (): Record<string, unknown> => ({
  record_id: 'rec-fuzz-0001',
  source: 'registry-a',
  vintage: today(),
  fields: { hba1c: 6.1, test_name: 'HbA1c', collected_on: '2024-05-01' },
  consent: { status: 'granted', scope: 'research' },
  checks: [{ name: 'range', passed: true }],
  sources: [{ name: 'ehr', agrees: true }],
  history: [{ at: '2024-05-01T10:00:00Z', hash: `sha256:${'ab'.repeat(32)}` }],
});

const none = (): RouteRequest => ({});
const register = (_: OrgIds, fresh: () => string): RouteRequest => ({ body: { agent_id: `new-${fresh()}`, name: 'New agent' } });
/** With a key of its own (DESIGN §9): the fuzzed mutations of it meet the idempotency paths too (a replay, 409 on a changed body). */
const ingest = (ids: OrgIds, fresh: () => string): RouteRequest => ({ body: { agent_id: ids.agent, event_type: 'output_generated', payload: {}, idempotency_key: `fz-${fresh()}` } });
const publicRecord = (ids: OrgIds): RouteRequest => ({ params: { org: ids.org, agent_id: ids.publicAgent } });
const webhook = (ids: OrgIds): RouteRequest => ({ params: { webhook_id: String(ids.webhook) } });
const studioAgent = (ids: OrgIds): RouteRequest => ({ params: { agent_id: ids.studioAgent } });
const chatAgent = (ids: OrgIds): RouteRequest => ({ params: { agent_id: ids.chatAgent } });

export const ROUTE_CASES: Readonly<Record<string, RouteCase>> = {
  'GET /health': { auth: 'none', withKey: 200, request: none },
  // Mounted with VIGIL_METRICS_TOKEN (the target server sets METRICS_TOKEN); an API key is no way in.
  'GET /metrics': { auth: 'none', withKey: 401, ownKey: 'metrics', request: none },
  'GET /openapi.json': { auth: 'none', withKey: 200, request: none },
  'GET /docs': { auth: 'none', withKey: 200, request: none },
  'GET /docs/swagger-ui.css': { auth: 'none', withKey: 200, request: none },
  'GET /docs/swagger-ui-bundle.js': { auth: 'none', withKey: 200, request: none },
  'GET /docs/docs.js': { auth: 'none', withKey: 200, request: none },
  'GET /cluster/map': { auth: 'key', request: none },
  'GET /orgs/me': { auth: 'key', request: none },
  'POST /admin/keys': { auth: 'admin', request: (_, fresh) => ({ body: { scopes: ['review'], name: `key ${fresh()}` } }) },
  'GET /admin/keys': { auth: 'admin', request: none },
  'DELETE /admin/keys/:key_id': { auth: 'admin', names: true, request: (ids) => ({ params: { key_id: ids.spareKey } }) },
  'GET /agents': { auth: 'key', request: () => ({ query: { limit: '10', offset: '0' } }) },
  'POST /agents': { auth: 'key', request: register },
  'GET /agents/:agent_id': { auth: 'key', names: true, request: (ids) => ({ params: { agent_id: ids.agent } }) },
  'PATCH /admin/agents/:agent_id': { auth: 'admin', names: true, request: (ids) => ({ params: { agent_id: ids.publicAgent }, body: { public: true } }) },
  'POST /events': { auth: 'events:write', names: true, freeform: ['payload'], request: ingest },
  'POST /events/batch': { auth: 'events:write', freeform: ['events'], request: (ids, fresh) => ({ body: { events: [ingest(ids, fresh).body] } }) },
  'GET /audit/export': { auth: 'key', request: (ids) => ({ query: { since_seq: '0', until_seq: String(ids.ledgerLength) } }) },
  'GET /audit/:agent_id/verify': { auth: 'key', names: true, request: (ids) => ({ params: { agent_id: ids.agent } }) },
  'GET /audit/checkpoint': { auth: 'key', request: none },
  // The tree takes committed rows a moment after their commit: seq 1 and size 1 are always in it.
  'GET /audit/proof/inclusion': { auth: 'key', request: () => ({ query: { seq: '1', tree_size: '1' } }) },
  'GET /audit/proof/consistency': { auth: 'key', request: () => ({ query: { from: '1', to: '1' } }) },
  'GET /webhooks': { auth: 'admin', request: none },
  'POST /webhooks': { auth: 'admin', request: (ids) => ({ body: { url: ids.hookUrl, events: ['review.escalated'] } }) },
  'GET /webhooks/:webhook_id': { auth: 'admin', names: true, request: webhook },
  'DELETE /webhooks/:webhook_id': { auth: 'admin', names: true, request: (ids) => ({ params: { webhook_id: String(ids.spareWebhook) } }) },
  'GET /webhooks/:webhook_id/deliveries': { auth: 'admin', names: true, request: (ids) => ({ ...webhook(ids), query: { limit: '10' } }) },
  'POST /webhooks/:webhook_id/test': { auth: 'admin', names: true, request: webhook },
  'POST /webhooks/:webhook_id/rotate-secret': { auth: 'admin', names: true, request: webhook },
  // A retried delivery fails again at once (dead again); one still queued is answered as it is.
  'POST /webhooks/:webhook_id/deliveries/:delivery_id/retry': {
    auth: 'admin',
    names: true,
    request: (ids) => ({ params: { webhook_id: String(ids.failingWebhook), delivery_id: String(ids.deadDelivery) } }),
  },
  'GET /reviews': { auth: 'review', request: (ids) => ({ query: { status: 'pending', limit: '10', agent_id: ids.agent } }) },
  'POST /reviews/:action_id': {
    auth: 'review',
    names: true,
    request: (ids) => ({ params: { action_id: String(ids.heldAction) }, body: { outcome: 'escalated', note: 'looked at it' } }),
  },
  'GET /exports': { auth: 'key', request: none },
  'POST /exports/bundle': {
    auth: 'key',
    names: true,
    request: (ids) => ({ body: { since_seq: 0, until_seq: ids.ledgerLength, agents: [ids.agent] } }),
  },
  'GET /billing/plan': { auth: 'key', request: none },
  'GET /billing/statement': { auth: 'key', request: () => ({ query: { month: month() } }) },
  'GET /pricing': { auth: 'none', withKey: 200, request: none },
  // Public reads refuse a key (spec 4.1: "a key must not be sent to these routes"): 400.
  'GET /public/agents/:org/:agent_id': { auth: 'none', withKey: 400, request: publicRecord },
  'GET /public/agents/:org': { auth: 'none', withKey: 400, request: (ids) => ({ params: { org: ids.org }, query: { limit: '10', offset: '0' } }) },
  'GET /public/log-key': { auth: 'none', withKey: 400, request: none },
  'GET /public/checkpoints/:org': { auth: 'none', withKey: 400, request: (ids) => ({ params: { org: ids.org } }) },
  'GET /public/tiles/:org/checkpoint': { auth: 'none', withKey: 400, request: (ids) => ({ params: { org: ids.org } }) },
  'GET /public/proof/:org/consistency': { auth: 'none', withKey: 400, request: (ids) => ({ params: { org: ids.org }, query: { from: '1', to: '1' } }) },
  'GET /public/tiles/:org/tile/*': { auth: 'none', withKey: 400, request: (ids) => ({ params: { org: ids.org, '*': '0/000.p/1' } }) },
  // A CORS preflight never carries credentials; it answers the same whatever is sent.
  'OPTIONS /public/agents/:org/:agent_id': { auth: 'none', withKey: 204, request: publicRecord },
  'OPTIONS /public/agents/:org': { auth: 'none', withKey: 204, request: (ids) => ({ params: { org: ids.org } }) },
  'GET /a/:org/:agent_id': { auth: 'none', withKey: 400, htmlNotFound: true, request: publicRecord },
  'GET /a/:org/:agent_id/verify': { auth: 'none', withKey: 400, htmlNotFound: true, request: publicRecord },
  // The agent page's script: a static file, the same whatever is sent (a key is not read).
  'GET /assets/log-check.js': { auth: 'none', withKey: 200, request: none },
  // The record-scoring interface has its own keys: it ignores a Vigil key where it takes none...
  'POST /api/v1/keys': { auth: 'none', withKey: 201, request: (_, fresh) => ({ body: { email: `dev-${fresh()}@example.test` } }) },
  // ...and refuses one where it needs its own.
  'POST /api/v1/score': { auth: 'none', withKey: 401, ownKey: 'sandbox', freeform: ['fields'], request: () => ({ body: scoreRecord() }) },
  'GET /studio/agents': { auth: 'review', request: none },
  'POST /studio/agents': { auth: 'review', request: (_, fresh) => ({ body: { name: `Studio ${fresh()}`, domain: 'clinical' } }) },
  'POST /studio/agents/suggest': { auth: 'review', request: () => ({ body: { name: 'Helper', domain: 'wellness' } }) },
  'GET /studio/agents/:agent_id': { auth: 'review', names: true, request: studioAgent },
  'POST /studio/agents/:agent_id/deploy': { auth: 'review', names: true, request: studioAgent },
  'PATCH /studio/agents/:agent_id/status': { auth: 'review', names: true, request: (ids) => ({ ...studioAgent(ids), query: { status: 'paused' } }) },
  'POST /chat/:agent_id': { auth: 'review', names: true, request: (ids) => ({ ...chatAgent(ids), body: { message: 'hello' } }) },
  'GET /chat/:agent_id/info': { auth: 'review', names: true, request: chatAgent },
};

const METHOD: Record<Route['method'], string> = { get: 'GET', post: 'POST', patch: 'PATCH', del: 'DELETE', put: 'PUT', options: 'OPTIONS' };

export function httpMethod(route: Route): string {
  return METHOD[route.method];
}

export function routeKey(route: Route): string {
  return `${httpMethod(route)} ${route.path}`;
}

/** Whether uWebSockets.js reads a body for this route (the router does for these methods). */
export function takesBody(route: Route): boolean {
  return route.method === 'post' || route.method === 'patch' || route.method === 'put';
}

/**
 * The route's entry. A collection's trailing-slash twin (`/webhooks/` beside `/webhooks`, mounted by
 * routes/collection.ts with the same handler) shares its entry.
 */
export function findCase(route: Route): RouteCase | undefined {
  const exact = ROUTE_CASES[routeKey(route)];
  if (exact !== undefined || !route.path.endsWith('/') || route.path === '/') return exact;
  return ROUTE_CASES[`${httpMethod(route)} ${route.path.slice(0, -1)}`];
}

/** A collection's trailing-slash twin: same handler as the route the table names. */
export function isTwin(route: Route): boolean {
  return ROUTE_CASES[routeKey(route)] === undefined && findCase(route) !== undefined;
}

/** The route's entry, or an error naming the route so that it is added to the table. */
export function caseOf(route: Route): RouteCase {
  const found = findCase(route);
  if (found === undefined) {
    throw new Error(
      `route ${routeKey(route)} (auth ${route.auth}) is not in test/support/route-table.ts: add it (its auth and a request that succeeds) so that the fuzz suite and the access matrices cover it`,
    );
  }
  return found;
}

/** Every route missing from the table, by key. */
export function unknownRoutes(routes: readonly Route[]): string[] {
  return routes.filter((r) => findCase(r) === undefined).map((r) => `${routeKey(r)} (auth ${r.auth})`);
}

/** Every route mounted with another auth than the table says, by key. */
export function wrongAuth(routes: readonly Route[]): string[] {
  return routes.flatMap((r) => {
    const expected = findCase(r)?.auth;
    return expected === undefined || expected === r.auth ? [] : [`${routeKey(r)}: mounted with ${r.auth}, expected ${expected}`];
  });
}

/** Fills a uWebSockets.js pattern's :params (and a trailing `*`, from `segments['*']`) with raw (already encoded) path segments. */
export function fillRaw(path: string, segments: Record<string, string>): string {
  const filled = path.replace(/:([A-Za-z_]+)/g, (_m, name: string) => {
    const value = segments[name];
    if (value === undefined) throw new Error(`no value for :${name} in ${path}`);
    return value;
  });
  if (!filled.endsWith('*')) return filled;
  const rest = segments['*'];
  if (rest === undefined) throw new Error(`no value for the * of ${path}`);
  return filled.slice(0, -1) + rest;
}

/** The path and query of a request, values percent-encoded (a trailing `*`'s value is a path: as given). */
export function target(route: Route, req: RouteRequest): string {
  const encoded = Object.fromEntries(Object.entries(req.params ?? {}).map(([k, v]) => [k, k === '*' ? v : encodeURIComponent(v)]));
  const query = new URLSearchParams(req.query ?? {}).toString();
  return fillRaw(route.path, encoded) + (query === '' ? '' : `?${query}`);
}

/** The names of a route's :params, and `*` for a trailing wildcard. */
export function paramNames(route: Route): string[] {
  return [...[...route.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]!), ...(route.path.endsWith('*') ? ['*'] : [])];
}
