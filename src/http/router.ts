import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import type { Scope } from '../domain/schemas.js';
import { VigilError } from '../errors.js';
import type { Registry } from '../services/registry.js';
import type { KeyRecord } from '../store/registry-store.js';
import { readJsonBody } from './body.js';
import { errorResponse } from './errors.js';
import { awaitAnswer, resumeReading, statusLine, watchAbort, type Exchange } from './exchange.js';
import { chargeEvents } from './key-rate.js';
import type { RateLimiter } from './rate-limit.js';
import { streamLines } from './stream.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { RouteObserver } from './observe.js';

/** `none`: public; `key`: any valid key; a scope: a key holding that scope. */
export type Auth = 'none' | 'key' | Scope;

export interface RouteContext {
  params: Record<string, string>;
  query: URLSearchParams;
  headers: Record<string, string>;
  /** The caller's key; set on every route whose auth is not `none`. */
  key: KeyRecord;
  body: unknown;
  ip: string;
  /** The request path (routes with `url`; otherwise ''), for a route ending in a wildcard. */
  url: string;
  /** The client's connection; `aborted` once it is gone (a writer then skips its undecided commands). */
  connection: { readonly aborted: boolean };
}

export type RouteResult =
  | { status?: number; body: unknown; headers?: Record<string, string> }
  | { status?: number; text: string; contentType: string; headers?: Record<string, string> }
  | { status?: number; bytes: Buffer; contentType: string; headers?: Record<string, string> }
  | { status?: number; lines: AsyncIterable<string> | Iterable<string>; contentType: string; headers?: Record<string, string> };

export interface Route {
  method: 'get' | 'post' | 'patch' | 'del' | 'put' | 'options';
  path: string;
  auth: Auth;
  /** Request headers the handler reads; default COMMON_HEADERS. Read only what is needed: it is the hot path. */
  headers?: readonly string[];
  /** Whether the handler needs the client address (`ctx.ip`); otherwise it is ''. */
  ip?: boolean;
  /** Whether the handler needs the request path (`ctx.url`): a route ending in `*`. */
  url?: boolean;
  /**
   * An audit read (export, verify, proofs, bundles; DESIGN §11): an `audit:read` key may call it
   * whatever its method, and with VIGIL_STRICT_AUDIT only such a key or an admin one may.
   */
  audit?: true;
  /**
   * How many events the request's body carries (an ingest batch): the key's rate counts them in
   * place of the request's one, before the handler runs (past it: 429, nothing written).
   */
  events?: (body: unknown) => number;
  /** Cluster mode: a keyed GET answered by the node it reaches, not its org's owner (a streamed or long answer). */
  forward?: false;
  /**
   * A public read of one org's log (`:org`) that reads the org's Merkle tree: its answer, less the
   * public gate's headers, as the org's owner gives it (cluster mode: `handler` admits the request
   * on the node asked, then has the owner run this; see logRoute). Never throws: errors are answers.
   */
  owner?: (ctx: RouteContext) => RouteResult;
  handler: (ctx: RouteContext) => RouteResult | Promise<RouteResult>;
}

export interface RouterDeps {
  registry: Registry;
  log: Logger;
  keyLimiter: RateLimiter | null;
  now: () => number;
  /**
   * Cluster mode's keyed GETs: answered by the org's owner (KeyedReads), read-your-writes there.
   * Absent in embedded mode, where the one copy is always current.
   */
  reads?: { answer(route: Route, ctx: RouteContext): Promise<RouteResult> } | undefined;
  /** VIGIL_STRICT_AUDIT: audit routes need the audit:read (or admin) scope rather than any key. */
  strictAudit?: boolean;
  /** GET /metrics' counters, when VIGIL_METRICS_TOKEN is set. */
  metrics?: Metrics | null;
}

/** A route's method as HTTP names it (metrics labels, access lines). */
export function httpMethod(method: Route['method']): string {
  return method === 'del' ? 'DELETE' : method.toUpperCase();
}

const NO_KEY = undefined as unknown as KeyRecord;
const COMMON_HEADERS: readonly string[] = ['authorization', 'content-type', 'content-length', 'accept'];
/** Shared by requests without a query string; handlers only read it. */
const NO_QUERY = new URLSearchParams();

/**
 * Mounts a route on the uWebSockets.js app: auth, rate limit, body, handler, response.
 * The per-request path creates no closures on the synchronous path (it is the hot path).
 */
export function mount(app: TemplatedApp, route: Route, deps: RouterDeps): void {
  const mounted: Mounted = {
    route,
    deps,
    names: [...route.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]!),
    hasBody: route.method === 'post' || route.method === 'patch' || route.method === 'put',
    wanted: route.headers ?? COMMON_HEADERS,
    // A collection's trailing-slash twin is the same route: one series, one name in access lines.
    observer: RouteObserver.of(deps.metrics ?? null, deps.log, httpMethod(route.method), route.path.length > 1 ? route.path.replace(/\/$/, '') : route.path),
  };
  app[route.method](route.path, (res: HttpResponse, req: HttpRequest) => handle(mounted, res, req));
}

interface Mounted {
  route: Route;
  deps: RouterDeps;
  names: string[];
  hasBody: boolean;
  wanted: readonly string[];
  observer: RouteObserver | null;
}

function handle(m: Mounted, res: HttpResponse, req: HttpRequest): void {
  const exchange: Exchange = { res, aborted: false, inHandler: true, log: m.deps.log };
  if (m.observer !== null) m.observer.begin(exchange, req);
  // Everything needed from `req` is copied now: it is invalid after this function returns.
  const headers: Record<string, string> = {};
  for (const name of m.wanted) {
    const value = req.getHeader(name);
    if (value !== '') headers[name] = value;
  }
  const params: Record<string, string> = {};
  for (let i = 0; i < m.names.length; i++) params[m.names[i]!] = safeDecode(req.getParameter(i));
  if (badFraming(exchange, req)) return;
  const rawQuery = req.getQuery() ?? '';
  const ctx: RouteContext = {
    params,
    query: rawQuery === '' ? NO_QUERY : new URLSearchParams(rawQuery),
    headers,
    key: NO_KEY,
    body: undefined,
    ip: m.route.ip === true ? Buffer.from(res.getRemoteAddressAsText()).toString('latin1') : '',
    url: m.route.url === true ? req.getUrl() : '',
    connection: exchange,
  };
  try {
    if (m.route.auth !== 'none') {
      ctx.key = authorize(m.route.auth, headers.authorization ?? '', m.deps, m.route);
      if (m.observer !== null) exchange.keyId = ctx.key.id;
    }
  } catch (error) {
    sendError(exchange, error);
    return;
  }
  if (m.hasBody) {
    // The answer comes after the body: uWebSockets.js needs onAborted before we return.
    watchAbort(exchange);
    exchange.inHandler = false;
    readJsonBody(res, headers['content-type'] ?? '', headers['content-length'] ?? '').then(
      (body) => {
        ctx.body = body;
        try {
          if (m.route.events !== undefined) chargeEvents(m.deps.keyLimiter, ctx.key.id, m.route.events(body), m.deps.now());
        } catch (error) {
          sendError(exchange, error);
          return;
        }
        run(m.route, exchange, ctx);
      },
      (error: unknown) => sendError(exchange, error),
    );
    return;
  }
  if (m.deps.reads !== undefined && m.route.method === 'get' && m.route.auth !== 'none') {
    watchAbort(exchange);
    exchange.inHandler = false;
    awaitAnswer(exchange);
    m.deps.reads.answer(m.route, ctx).then(
      (result) => respond(exchange, result),
      (error: unknown) => sendError(exchange, error),
    );
    return;
  }
  run(m.route, exchange, ctx);
  exchange.inHandler = false;
}

/**
 * Two Content-Length headers frame the body two ways (request smuggling): 400, then close (RFC
 * 9112 §6.3), and nothing after it on the connection may run. An answer written now would only
 * close the connection after uWebSockets.js has parsed (and routed) what follows in the same
 * read; answered on the next turn, a request that follows makes uWebSockets.js close the
 * connection before routing it (the 400 is then lost with it). Checked on every request, whatever
 * headers its route reads (the catch-all included).
 */
export function badFraming(exchange: Exchange, req: HttpRequest): boolean {
  if (req.getHeader('content-length') === '' || !hasConflictingLength(req)) return false;
  refuseFraming(exchange);
  return true;
}

function refuseFraming(exchange: Exchange): void {
  watchAbort(exchange);
  exchange.inHandler = false;
  exchange.close = true;
  const error = new VigilError('bad_request', 'conflicting Content-Length headers', [{ path: 'content-length', message: 'sent more than once' }]);
  setImmediate(() => sendError(exchange, error));
}

/** Whether the request carries Content-Length more than once (uWebSockets.js reads the first). */
function hasConflictingLength(req: HttpRequest): boolean {
  let seen = 0;
  req.forEach((name) => {
    if (name === 'content-length') seen++;
  });
  return seen > 1;
}

function run(route: Route, exchange: Exchange, ctx: RouteContext): void {
  let result: RouteResult | Promise<RouteResult>;
  try {
    result = route.handler(ctx);
  } catch (error) {
    sendError(exchange, error);
    return;
  }
  if (result instanceof Promise) {
    if (exchange.inHandler === true) watchAbort(exchange);
    awaitAnswer(exchange);
    result.then(
      (r) => respond(exchange, r),
      (error: unknown) => sendError(exchange, error),
    );
  } else {
    respond(exchange, result);
  }
}

/**
 * The caller's key for a route needing `auth`: 401 without a valid key, 403 without the scope,
 * 429 past the key's rate (a route carrying events is counted later, by them). A route any key may call (`key`) refuses a key holding only
 * `audit:read` unless it reads (GET, or an audit route); an audit route under VIGIL_STRICT_AUDIT
 * takes only an `audit:read` or `admin` key.
 */
export function authorize(auth: Exclude<Auth, 'none'>, authorization: string, deps: RouterDeps, route?: Pick<Route, 'method' | 'audit' | 'events'>): KeyRecord {
  const key = deps.registry.authenticate(authorization);
  if (auth !== 'key') {
    if (!key.scopes.includes(auth)) throw new VigilError('forbidden', `this route needs the ${auth} scope`);
  } else if (route !== undefined) {
    if (route.method !== 'get' && route.audit !== true && key.scopes.every((s) => s === 'audit:read')) {
      throw new VigilError('forbidden', 'an audit:read key only reads: this route needs an events:write, review or admin key');
    }
    if (route.audit === true && deps.strictAudit === true && !key.scopes.includes('audit:read') && !key.scopes.includes('admin')) {
      throw new VigilError('forbidden', 'this route needs the audit:read (or admin) scope: VIGIL_STRICT_AUDIT is on');
    }
  }
  // A route carrying events is counted by them once its body is read.
  if (deps.keyLimiter !== null && route?.events === undefined) {
    const decision = deps.keyLimiter.take(key.id, deps.now());
    if (!decision.allowed) {
      throw new VigilError('rate_limited', 'too many requests for this key', undefined, {
        retryAfterSeconds: decision.resetSeconds,
      });
    }
  }
  return key;
}

function safeDecode(value: string): string {
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

export function sendError(exchange: Exchange, error: unknown): void {
  const { status, body, headers } = errorResponse(error, exchange.log);
  write(exchange, status, 'application/json', body, headers);
}

function respond(exchange: Exchange, result: RouteResult): void {
  const status = result.status ?? 200;
  if ('lines' in result) {
    if (exchange.inHandler === true) watchAbort(exchange);
    awaitAnswer(exchange);
    void streamLines(exchange, status, result.contentType, result.lines, result.headers);
    return;
  }
  if ('text' in result) {
    write(exchange, status, result.contentType, result.text, result.headers);
    return;
  }
  if ('bytes' in result) {
    write(exchange, status, result.contentType, result.bytes, result.headers);
    return;
  }
  const body = result.body === undefined ? '' : JSON.stringify(result.body);
  write(exchange, status, 'application/json', body, result.headers);
}

export function write(exchange: Exchange, status: number, contentType: string, body: string | Buffer, headers?: Record<string, string>): void {
  if (exchange.aborted) return;
  if (exchange.inHandler === true) send(exchange, status, contentType, body, headers);
  else exchange.res.cork(() => send(exchange, status, contentType, body, headers));
}

function send(exchange: Exchange, status: number, contentType: string, body: string | Buffer, headers?: Record<string, string>): void {
  const { res } = exchange;
  resumeReading(exchange);
  res.writeStatus(statusLine(status));
  if (body.length > 0 || status !== 304) res.writeHeader('content-type', contentType);
  if (headers !== undefined) for (const name in headers) res.writeHeader(name, headers[name]!);
  res.end(body, exchange.close === true);
  exchange.observer?.answered(exchange, status);
}
