import { ingestEventBody } from '../../domain/schemas.js';
import { unwrap, type AppDeps } from '../deps.js';
import type { Route } from '../router.js';
import { collection } from './collection.js';
import { validate } from '../validate.js';

/** Event ingest: one event to the org's single writer, one gate decision back. */
export function ingestRoutes(deps: AppDeps): Route[] {
  const ingest: Route['handler'] = async ({ key, body, connection }) => {
    const event = validate(ingestEventBody, body);
    return { body: unwrap(await deps.commands.request({ type: 'event.ingest', org: key.org, event }, { abandoned: connection })) };
  };
  return collection({ method: 'post', path: '/events', auth: 'events:write', handler: ingest });
}
