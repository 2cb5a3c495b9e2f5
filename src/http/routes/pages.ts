import type { PublicRecords } from '../../actors/public-records.js';
import type { AppDeps } from '../deps.js';
import { agentPage, notFoundPage } from '../pages/agent-page.js';
import { PAGE_HEADERS } from '../pages/html.js';
import { verifyPage } from '../pages/verify-page.js';
import type { Route } from '../router.js';
import { publicRoute, type PublicGate } from './public.js';
import type { PublicRecord } from '../../domain/public-record.js';

const NOT_FOUND_PAGE = notFoundPage();
const HTML = 'text/html; charset=utf-8';

/** The human pages: `/a/{org}/{agent_id}` and its verification guide. Same rules as /public. */
export function pageRoutes(deps: AppDeps, records: PublicRecords, gate: PublicGate): Route[] {
  const page = (path: string, render: (record: PublicRecord) => string): Route =>
    publicRoute(path, gate, (ctx, headers) => {
      const record = records.record(ctx.params.org ?? '', ctx.params.agent_id ?? '');
      const out = { ...headers, ...PAGE_HEADERS, 'cache-control': 'public, max-age=60' };
      if (record === undefined) return { status: 404, text: NOT_FOUND_PAGE, contentType: HTML, headers: out };
      return { text: render(record), contentType: HTML, headers: out };
    });
  return [
    page('/a/:org/:agent_id', (record) =>
      agentPage(record, `${deps.config.baseUrl}/public/agents/${encodeURIComponent(record.org)}/${encodeURIComponent(record.agent_id)}`),
    ),
    page('/a/:org/:agent_id/verify', (record) => verifyPage(record, deps.config.baseUrl)),
  ];
}
