import { agentId, registerAgentBody, updateAgentBody } from '../../domain/schemas.js';
import { VigilError } from '../../errors.js';
import { unwrap, type AppDeps } from '../deps.js';
import type { Route } from '../router.js';
import { collection } from './collection.js';
import { queryInt, validate } from '../validate.js';

/** Agent registration, reading and administration. Writes go to the org's single writer. */
export function agentRoutes(deps: AppDeps): Route[] {
  const register: Route['handler'] = async ({ key, body, connection }) => {
    const agent = validate(registerAgentBody, body);
    const view = unwrap(await deps.commands.request({ type: 'agent.register', org: key.org, agent }, { abandoned: connection }));
    return { status: 201, body: view };
  };
  const ownAgentId = (raw: string | undefined): string => {
    const parsed = agentId.safeParse(raw);
    if (!parsed.success) throw new VigilError('not_found', `agent ${raw ?? ''} not found`);
    return parsed.data;
  };
  return [
    ...collection({ method: 'post', path: '/agents', auth: 'key', handler: register }),
    // The org's agents with their state, in registration order (the shape of the public list, 2.2).
    ...collection({
      method: 'get',
      path: '/agents',
      auth: 'key',
      handler: ({ key, query }) => {
        const limit = queryInt(query, 'limit', 50, 1, 100);
        const offset = queryInt(query, 'offset', 0, 0, 1e9);
        const agents = [...(deps.directory.org(key.org)?.agents.values() ?? [])];
        return { body: { org: key.org, total: agents.length, limit, offset, agents: agents.slice(offset, offset + limit) } };
      },
    }),
    {
      method: 'get',
      path: '/agents/:agent_id',
      auth: 'key',
      handler: ({ key, params }) => {
        const id = ownAgentId(params.agent_id);
        const agent = deps.directory.get(key.org, id);
        if (agent === undefined) throw new VigilError('not_found', `agent ${id} not found`);
        return { body: agent };
      },
    },
    {
      method: 'patch',
      path: '/admin/agents/:agent_id',
      auth: 'admin',
      handler: async ({ key, params, body, connection }) => {
        const id = ownAgentId(params.agent_id);
        const changes = validate(updateAgentBody, body);
        return { body: unwrap(await deps.commands.request({ type: 'agent.update', org: key.org, agentId: id, changes }, { abandoned: connection })) };
      },
    },
  ];
}
