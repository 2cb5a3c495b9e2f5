import { ingestEventBody, registerAgentBody } from '../../domain/schemas.js';
import { unwrap, type AppDeps } from '../deps.js';
import type { Route } from '../router.js';
import { validate } from '../validate.js';

/** Agent registration and event ingest: both go to the org's single writer over the bus. */
export function ingestRoutes(deps: AppDeps): Route[] {
  const register: Route['handler'] = async ({ key, body }) => {
    const agent = validate(registerAgentBody, body);
    const view = unwrap(await deps.bus.request({ type: 'agent.register', org: key.org, agent }));
    return { status: 201, body: view };
  };
  const ingest: Route['handler'] = async ({ key, body }) => {
    const event = validate(ingestEventBody, body);
    return { body: unwrap(await deps.bus.request({ type: 'event.ingest', org: key.org, event })) };
  };
  return [
    { method: 'post', path: '/agents/', auth: 'key', handler: register },
    { method: 'post', path: '/agents', auth: 'key', handler: register },
    { method: 'post', path: '/events/', auth: 'events:write', handler: ingest },
    { method: 'post', path: '/events', auth: 'events:write', handler: ingest },
  ];
}
