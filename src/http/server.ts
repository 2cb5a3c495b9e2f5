import uws from 'uWebSockets.js';
import { VigilError } from '../errors.js';
import type { AppDeps } from './deps.js';
import { RateLimiter } from './rate-limit.js';
import { mount, sendError, type Route } from './router.js';
import { agentRoutes } from './routes/agents.js';
import { auditRoutes } from './routes/audit.js';
import { billingRoutes } from './routes/billing.js';
import { exportRoutes } from './routes/exports.js';
import { ingestRoutes } from './routes/ingest.js';
import { pageRoutes } from './routes/pages.js';
import { publicGate, publicRoutes } from './routes/public.js';
import { recordScoringRoutes } from './routes/record-scoring.js';
import { reviewRoutes } from './routes/reviews.js';
import { demoRoutes } from './routes/studio.js';
import { systemRoutes } from './routes/system.js';
import { webhookRoutes } from './routes/webhooks.js';

export interface HttpServer {
  port: number;
  close(): void;
}

/** The uWebSockets.js front end: mounts every route group and listens. */
export function startHttpServer(deps: AppDeps): Promise<HttpServer> {
  const app = uws.App();
  const keyLimiter =
    deps.config.keyRateLimitPerSecond > 0 ? new RateLimiter(deps.config.keyRateLimitPerSecond, 1000) : null;
  const gate = publicGate(deps);
  const routes: Route[] = [
    ...systemRoutes(deps),
    ...agentRoutes(deps),
    ...ingestRoutes(deps),
    ...auditRoutes(deps),
    ...webhookRoutes(deps),
    ...reviewRoutes(deps),
    ...exportRoutes(deps),
    ...billingRoutes(deps),
    ...publicRoutes(deps, deps.publicRecords, gate),
    ...pageRoutes(deps, deps.publicRecords, gate),
    ...recordScoringRoutes({ store: deps.scoringKeys, now: deps.now }),
    // Demo routes exist only in demo mode: otherwise their paths fall through to the 404 below.
    ...(deps.studio === null ? [] : demoRoutes({ studio: deps.studio })),
  ];
  for (const route of routes) mount(app, route, { registry: deps.registry, keyLimiter, now: deps.now });
  app.any('/*', (res, req) => {
    const exchange = { res, aborted: false };
    res.onAborted(() => {
      exchange.aborted = true;
    });
    sendError(exchange, new VigilError('not_found', `no route for ${req.getMethod().toUpperCase()} ${req.getUrl()}`));
  });
  return new Promise((resolve, reject) => {
    app.listen(deps.config.host, deps.config.port, (socket) => {
      if (socket === false) {
        reject(new Error(`cannot listen on ${deps.config.host}:${deps.config.port}`));
        return;
      }
      resolve({ port: uws.us_socket_local_port(socket), close: () => uws.us_listen_socket_close(socket) });
    });
  });
}
