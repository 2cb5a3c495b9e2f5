import { createHash, timingSafeEqual } from 'node:crypto';
import { VERSION } from '../../version.js';
import { VigilError } from '../../errors.js';
import { createKeyBody } from '../../domain/schemas.js';
import type { AppDeps } from '../deps.js';
import type { Route } from '../router.js';
import { collection } from './collection.js';
import { validate } from '../validate.js';
import { partitionMap } from '../../nats/partition-map.js';


/** Health, metrics, the partition map, the caller's org, and its keys: created, listed, revoked. */
export function systemRoutes(deps: AppDeps): Route[] {
  return [
    ...(deps.metrics === null ? [] : [metricsRoute(deps.metrics)]),
    {
      method: 'get',
      path: '/health',
      auth: 'none',
      handler: () => ({
        body:
          deps.cluster === undefined
            ? { status: 'ok', version: VERSION, mode: deps.mode }
            : { status: 'ok', version: VERSION, mode: deps.mode, node: deps.cluster.node, partitions_owned: deps.cluster.partitionsOwned() },
      }),
    },
    {
      method: 'get',
      path: '/cluster/map',
      auth: 'key',
      // The same on every node (the leases' bucket): answered where it is asked.
      forward: false,
      // Embedded: one node owns every org. The map changes as leases move: never cached.
      handler: ({ key }) => ({
        body: { org: key.org, ...(deps.cluster?.map() ?? partitionMap([deps.config.baseUrl])) },
        headers: { 'cache-control': 'no-store' },
      }),
    },
    {
      method: 'get',
      path: '/orgs/me',
      auth: 'key',
      handler: ({ key }) => {
        const org = deps.registry.getOrg(key.org);
        return {
          body: {
            slug: key.org,
            created_at: org?.created_at ?? null,
            plan: org?.plan ?? 'free',
            key: { id: key.id, name: key.name, scopes: key.scopes },
          },
        };
      },
    },
    ...collection({
      method: 'post',
      path: '/admin/keys',
      auth: 'admin',
      handler: async ({ key, body }) => {
        const input = validate(createKeyBody, body);
        const created = await deps.registry.createKey(key.org, input.scopes, input.name ?? null);
        return { status: 201, body: { id: created.id, key: created.key, scopes: created.scopes, name: created.name } };
      },
    }),
    // The org's keys (revoked ones too, with revoked_at), never a secret or a digest.
    ...collection({ method: 'get', path: '/admin/keys', auth: 'admin', handler: ({ key }) => ({ body: deps.registry.listKeys(key.org) }) }),
    {
      method: 'del',
      path: '/admin/keys/:key_id',
      auth: 'admin',
      // Refused from the next request on, on every node once its store holds the change (cluster: milliseconds).
      handler: async ({ key, params }) => ({ body: await deps.registry.revokeOwnKey(key.org, params.key_id ?? '') }),
    },
  ];
}

/**
 * `GET /metrics` (DESIGN §11): Prometheus text for a scraper sending VIGIL_METRICS_TOKEN as Bearer
 * (compared in constant time); mounted only when the token is set, so without it the path is a 404.
 */
function metricsRoute({ metrics, token }: NonNullable<AppDeps['metrics']>): Route {
  const expected = digest(token);
  return {
    method: 'get',
    path: '/metrics',
    auth: 'none',
    handler: async ({ headers }) => {
      const sent = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? '')?.[1];
      if (sent === undefined) throw new VigilError('unauthorized', 'send the metrics token (VIGIL_METRICS_TOKEN) as Authorization: Bearer <token>');
      if (!timingSafeEqual(digest(sent), expected)) throw new VigilError('unauthorized', 'wrong metrics token');
      const { text, contentType } = await metrics.scrape();
      return { text, contentType, headers: { 'cache-control': 'no-store' } };
    },
  };
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
