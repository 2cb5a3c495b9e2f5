import type { PublicRecords } from '../../actors/public-records.js';
import { POLICY_V1, policyDigest, type Policy } from '../../domain/policy.js';
import type { PublicRecord } from '../../domain/public-record.js';
import type { AppDeps } from '../deps.js';
import { agentPage, notFoundPage } from '../pages/agent-page.js';
import { ASSET_HEADERS, LOG_CHECK_JS, LOG_CHECK_PATH, LOG_CHECK_SRC } from '../pages/assets.js';
import { PAGE_HEADERS, SCRIPTED_PAGE_HEADERS } from '../pages/html.js';
import { verifyPage } from '../pages/verify-page.js';
import type { Route } from '../router.js';
import { publicRoute, type PublicGate } from './public.js';

const NOT_FOUND_PAGE = notFoundPage();
const HTML = 'text/html; charset=utf-8';
/** The policies whose thresholds a page can state, by digest (a record names the one that scored it). */
const POLICIES = new Map<string, Policy>([[policyDigest(POLICY_V1), POLICY_V1]]);

/**
 * The human pages: `/a/{org}/{agent_id}` and its verification guide, same rules as /public; and
 * the agent page's script, a static file.
 */
export function pageRoutes(deps: AppDeps, records: PublicRecords, gate: PublicGate): Route[] {
  const page = (path: string, pageHeaders: Record<string, string>, render: (record: PublicRecord) => string): Route =>
    publicRoute(path, gate, (ctx, headers) => {
      const record = records.record(ctx.params.org ?? '', ctx.params.agent_id ?? '');
      const cache = { 'cache-control': 'public, max-age=60' };
      if (record === undefined) return { status: 404, text: NOT_FOUND_PAGE, contentType: HTML, headers: { ...headers, ...PAGE_HEADERS, ...cache } };
      return { text: render(record), contentType: HTML, headers: { ...headers, ...pageHeaders, ...cache } };
    });
  return [
    page('/a/:org/:agent_id', SCRIPTED_PAGE_HEADERS, (record) =>
      agentPage(record, {
        jsonUrl: `${deps.config.baseUrl}/public/agents/${encodeURIComponent(record.org)}/${encodeURIComponent(record.agent_id)}`,
        script: LOG_CHECK_SRC,
        thresholds: POLICIES.get(record.policy_digest)?.thresholds ?? null,
      }),
    ),
    page('/a/:org/:agent_id/verify', PAGE_HEADERS, (record) => verifyPage(record, deps.config.baseUrl)),
    // Static, the same for everyone: no rate limit, and a key sent along is simply not read.
    {
      method: 'get',
      path: LOG_CHECK_PATH,
      auth: 'none',
      headers: [],
      handler: () => ({ text: LOG_CHECK_JS, contentType: 'application/javascript; charset=utf-8', headers: ASSET_HEADERS }),
    },
  ];
}
