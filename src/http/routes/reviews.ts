import { reviewDecisionBody } from '../../domain/schemas.js';
import { VigilError } from '../../errors.js';
import { unwrap, type AppDeps } from '../deps.js';
import type { Route } from '../router.js';
import { collection } from './collection.js';
import { parseIntParam, queryInt, validate } from '../validate.js';

/** The human review loop (scope review): held actions, and decisions on them. */
export function reviewRoutes(deps: AppDeps): Route[] {
  return [
    ...collection({
      method: 'get',
      path: '/reviews',
      auth: 'review',
      handler: ({ key, query }) => {
        const status = query.get('status') ?? 'pending';
        if (status !== 'pending' && status !== 'decided') {
          throw new VigilError('validation_failed', 'invalid query: status', [{ path: 'status', message: 'pending or decided' }]);
        }
        const limit = queryInt(query, 'limit', 50, 1, 500);
        const agent = query.get('agent_id') ?? undefined;
        return { body: deps.reviews.list(key.org, status, limit, agent) };
      },
    }),
    {
      method: 'post',
      path: '/reviews/:action_id',
      auth: 'review',
      handler: async ({ key, params, body, connection }) => {
        const actionId = parseIntParam(params.action_id, 0, 1, Number.MAX_SAFE_INTEGER);
        if (actionId === null) throw new VigilError('not_found', `no held action ${params.action_id ?? ''}`);
        const decision = validate(reviewDecisionBody, body);
        const reviewer = key.name ?? key.id;
        return { body: unwrap(await deps.commands.request({ type: 'review.decide', org: key.org, actionId, decision, reviewer }, { abandoned: connection })) };
      },
    },
  ];
}
