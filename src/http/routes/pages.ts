import type { PublicRecords } from '../../actors/public-records.js';
import type { AppDeps } from '../deps.js';
import { agentPage, notFoundPage } from '../pages/agent-page.js';
import { PAGE_HEADERS } from '../pages/html.js';
import { verifyPage } from '../pages/verify-page.js';
import type { Route, RouteContext, RouteResult } from '../router.js';
import { PUBLIC_HEADERS, type PublicGate } from './public.js';

const NOT_FOUND_PAGE = notFoundPage();

/** The human pages: `/a/{org}/{agent_id}` and its verification guide. Same rules as /public. */
export function pageRoutes(deps: AppDeps, records: PublicRecords, gate: PublicGate): Route[] {
  const page =
    (render: (ctx: RouteContext) => string | undefined): Route['handler'] =>
    (ctx): RouteResult => {
      const { headers, refusal } = gate.admit(ctx);
      if (refusal !== null) return refusal;
      const html = render(ctx);
      const out = { ...headers, ...PAGE_HEADERS, 'cache-control': 'public, max-age=60' };
      if (html === undefined) return { status: 404, text: NOT_FOUND_PAGE, contentType: 'text/html; charset=utf-8', headers: out };
      return { text: html, contentType: 'text/html; charset=utf-8', headers: out };
    };
  const find = (ctx: RouteContext) => {
    return records.record(ctx.params.org ?? '', ctx.params.agent_id ?? '');
  };
  return [
    {
      method: 'get',
      path: '/a/:org/:agent_id',
      auth: 'none',
      headers: PUBLIC_HEADERS,
      ip: true,
      handler: page((ctx) => {
        const record = find(ctx);
        if (record === undefined) return undefined;
        const json = `${deps.config.baseUrl}/public/agents/${encodeURIComponent(record.org)}/${encodeURIComponent(record.agent_id)}`;
        return agentPage(record, json);
      }),
    },
    {
      method: 'get',
      path: '/a/:org/:agent_id/verify',
      auth: 'none',
      headers: PUBLIC_HEADERS,
      ip: true,
      handler: page((ctx) => {
        const record = find(ctx);
        return record === undefined ? undefined : verifyPage(record, deps.config.baseUrl);
      }),
    },
  ];
}
