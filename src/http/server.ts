import uws from 'uWebSockets.js';
import { VigilError } from '../errors.js';
import type { AppDeps } from './deps.js';
import { RateLimiter } from './rate-limit.js';
import { badFraming, mount, sendError, type Route } from './router.js';
import { watchAbort, type Exchange } from './exchange.js';
import { RouteObserver } from './observe.js';
import { agentRoutes } from './routes/agents.js';
import { auditRoutes } from './routes/audit.js';
import { billingRoutes } from './routes/billing.js';
import { exportRoutes } from './routes/exports.js';
import { ingestRoutes } from './routes/ingest.js';
import { mountIngestStream } from './ingest-stream.js';
import { pageRoutes } from './routes/pages.js';
import { publicGate, publicRoutes } from './routes/public.js';
import { recordScoringRoutes } from '../record-scoring/routes.js';
import { reviewRoutes } from './routes/reviews.js';
import { demoRoutes } from './routes/studio.js';
import { systemRoutes } from './routes/system.js';
import { transparencyRoutes } from './routes/transparency.js';
import { docsRoutes } from './routes/docs.js';
import { webhookRoutes } from './routes/webhooks.js';
import type { Logger } from '../log.js';

/** The native listen takes (host, port, options, cb); the published typings lack that overload. */
type ListenWithOptions = (host: string, port: number, options: number, cb: (socket: uws.us_listen_socket | false) => void) => uws.TemplatedApp;
const EXCLUSIVE_PORT = (uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT;

export interface HttpServer {
  port: number;
  /** The routes mounted (what the access matrices and the fuzzer walk). */
  routes: readonly Route[];
  close(): void;
}

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * The uWebSockets.js front end. It listens first and mounts the routes once `makeDeps` resolves for
 * the port actually bound, so that with port 0 the URLs in the deps name the real port. Until then
 * every request answers 503 `unavailable` with Retry-After (starting); if `makeDeps` throws, the
 * listener is closed.
 */
export async function startHttpServer(host: string, port: number, log: Logger, makeDeps: (port: number) => Promise<AppDeps>): Promise<HttpServer> {
  const app = uws.App();
  let ready = false;
  /** The catch-all's observers by method: the usual HTTP methods by name, any other as OTHER (labels stay bounded). */
  let unmatched: ((method: string) => RouteObserver | null) | null = null;
  // uWebSockets.js matches the most specific route whatever the order of registration, so this
  // catch-all only sees what no route mounted later takes.
  app.any('/*', (res, req) => {
    const exchange: Exchange = { res, aborted: false, log };
    unmatched?.(req.getMethod().toUpperCase())?.begin(exchange, req);
    watchAbort(exchange);
    if (badFraming(exchange, req)) return;
    const error = ready
      ? new VigilError('not_found', `no route for ${req.getMethod().toUpperCase()} ${req.getUrl()}`)
      : new VigilError('unavailable', 'the service is starting', undefined, { retryAfterSeconds: 1 });
    sendError(exchange, error);
  });
  const socket = await new Promise<uws.us_listen_socket>((resolve, reject) => {
    // Exclusive: uWebSockets.js binds with SO_REUSEPORT otherwise, and a second server on the same
    // port would silently share its connections.
    (app.listen as unknown as ListenWithOptions).call(app, host, port, EXCLUSIVE_PORT, (s) =>
      s === false ? reject(new Error(`cannot listen on ${host}:${port} (in use?)`)) : resolve(s),
    );
  });
  const bound = uws.us_socket_local_port(socket);
  const close = (): void => uws.us_listen_socket_close(socket);
  let routes: Route[];
  try {
    const deps = await makeDeps(bound);
    routes = mountAll(app, deps);
    const observers = new Map<string, RouteObserver | null>();
    unmatched = (method) => {
      const name = KNOWN_METHODS.has(method) ? method : 'OTHER';
      let observer = observers.get(name);
      if (observer === undefined) {
        observer = RouteObserver.of(deps.metrics?.metrics ?? null, log, name, '(unmatched)');
        observers.set(name, observer);
      }
      return observer;
    };
    ready = true;
  } catch (error) {
    close();
    throw error;
  }
  return { port: bound, routes, close };
}

function mountAll(app: uws.TemplatedApp, deps: AppDeps): Route[] {
  const keyLimiter =
    deps.config.keyRateLimitPerSecond > 0 ? new RateLimiter(deps.config.keyRateLimitPerSecond, 1000) : null;
  const routes = appRoutes(deps);
  const routerDeps = {
    registry: deps.registry,
    keyLimiter,
    now: deps.now,
    log: deps.log,
    reads: deps.reads,
    strictAudit: deps.config.strictAudit,
    metrics: deps.metrics?.metrics ?? null,
  };
  for (const route of routes) mount(app, route, routerDeps);
  deps.reads?.register(routes);
  mountIngestStream(app, deps, routerDeps);
  return routes;
}

/** Every route the service mounts for these deps (the test matrices are generated from it). */
export function appRoutes(deps: AppDeps): Route[] {
  const gate = publicGate(deps);
  const routes: Route[] = [
    ...systemRoutes(deps),
    ...agentRoutes(deps),
    ...ingestRoutes(deps),
    ...auditRoutes(deps),
    ...transparencyRoutes(deps, gate),
    ...webhookRoutes(deps),
    ...reviewRoutes(deps),
    ...exportRoutes(deps),
    ...billingRoutes(deps),
    ...publicRoutes(deps, deps.publicRecords, gate),
    ...pageRoutes(deps, deps.publicRecords, gate),
    ...recordScoringRoutes({ store: deps.scoringKeys, now: deps.now }),
    // Demo routes exist only in demo mode: otherwise their paths fall through to the 404.
    ...(deps.studio === null ? [] : demoRoutes({ studio: deps.studio })),
  ];
  // The API's description, of every route above and itself.
  routes.push(...docsRoutes(deps, () => routes));
  return routes;
}
