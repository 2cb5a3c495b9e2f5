import { createStudioAgentBody, statusQuery, suggestBody } from '../../demo/schemas.js';
import type { Studio } from '../../services/studio.js';
import { unwrap } from '../deps.js';
import type { Route } from '../router.js';
import { validate } from '../validate.js';
import { chatRoutes, providerHeaders, studioAgentParam } from './chat.js';
import { collection } from './collection.js';

/** What the demo routes use. Mounted only in demo mode (VIGIL_DEMO=1); otherwise they do not exist. */
export interface DemoDeps {
  studio: Studio;
}

/** Every demo-mode route: studio (spec 4.7) and chat (4.8). */
export function demoRoutes(deps: DemoDeps): Route[] {
  return [...studioRoutes(deps), ...chatRoutes(deps)];
}

/** Studio agents of the caller's org (spec 4.7, scope review). */
export function studioRoutes(deps: DemoDeps): Route[] {
  const { studio } = deps;
  return [
    ...collection({
      method: 'get',
      path: '/studio/agents',
      auth: 'review',
      handler: async ({ key }) => ({ body: await studio.list(key.org) }),
    }),
    ...collection({
      method: 'post',
      path: '/studio/agents',
      auth: 'review',
      handler: async ({ key, body }) => {
        const input = validate(createStudioAgentBody, body);
        return { status: 201, body: unwrap(await studio.create(key.org, input)) };
      },
    }),
    {
      method: 'post',
      path: '/studio/agents/suggest',
      auth: 'review',
      handler: async ({ key, body }) => {
        const input = validate(suggestBody, body);
        const generated = await studio.suggest(key.org, input);
        return { body: generated.value, headers: providerHeaders(generated) };
      },
    },
    {
      method: 'get',
      path: '/studio/agents/:agent_id',
      auth: 'review',
      handler: async ({ key, params }) => ({ body: unwrap(await studio.get(key.org, studioAgentParam(params.agent_id))) }),
    },
    {
      method: 'post',
      path: '/studio/agents/:agent_id/deploy',
      auth: 'review',
      handler: async ({ key, params }) => ({ body: unwrap(await studio.deploy(key.org, studioAgentParam(params.agent_id))) }),
    },
    {
      method: 'patch',
      path: '/studio/agents/:agent_id/status',
      auth: 'review',
      handler: async ({ key, params, query }) => {
        const id = studioAgentParam(params.agent_id);
        const { status } = validate(statusQuery, { status: query.get('status') ?? undefined }, 'query');
        return { body: unwrap(await studio.setStatus(key.org, id, status)) };
      },
    },
  ];
}
