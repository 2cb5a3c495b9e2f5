import type { Generated } from '../../demo/fallback.js';
import { chatBody } from '../../demo/schemas.js';
import { agentId } from '../../domain/schemas.js';
import { VigilError } from '../../errors.js';
import { unwrap } from '../deps.js';
import type { Route } from '../router.js';
import { validate } from '../validate.js';
import type { DemoDeps } from './studio.js';

/** Chat with deployed studio agents (spec 4.8, demo mode only, scope review, own org). */
export function chatRoutes(deps: DemoDeps): Route[] {
  const { studio } = deps;
  return [
    {
      method: 'post',
      path: '/chat/:agent_id',
      auth: 'review',
      handler: async ({ key, params, body }) => {
        const id = studioAgentParam(params.agent_id);
        const input = validate(chatBody, body);
        const { result, generated } = unwrap(await studio.chat(key.org, id, input, `chat:${key.id}`));
        return { body: result, headers: providerHeaders(generated) };
      },
    },
    {
      method: 'get',
      path: '/chat/:agent_id/info',
      auth: 'review',
      handler: async ({ key, params }) => ({ body: unwrap(await studio.info(key.org, studioAgentParam(params.agent_id))) }),
    },
  ];
}

/** A malformed agent_id names no agent: 404, like an unknown one. */
export function studioAgentParam(raw: string | undefined): string {
  const parsed = agentId.safeParse(raw);
  if (!parsed.success) throw new VigilError('not_found', `studio agent ${raw ?? ''} not found`);
  return parsed.data;
}

/**
 * `X-Vigil-Provider` names the provider whose text is in the answer (`builtin` or
 * `openai-compatible`); `X-Vigil-Provider-Fallback` names the configured one that failed, when the
 * built-in generator stood in for it.
 */
export function providerHeaders(generated: Generated<unknown>): Record<string, string> {
  const headers: Record<string, string> = { 'x-vigil-provider': generated.provider };
  if (generated.fallbackFrom !== null) headers['x-vigil-provider-fallback'] = generated.fallbackFrom;
  return headers;
}
