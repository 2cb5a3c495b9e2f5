import { z } from 'zod';
import { MONTH } from '../../domain/billing.js';
import { createKeyBody, registerAgentBody, updateAgentBody } from '../../domain/schemas.js';
import { BODY, errors, intParam, KEY, READ, SCOPED, WRITE } from './common.js';
import type { Operation } from './operation.js';
import { agentList, agentSummary, agentView, billingPlan, clusterMap, createdKey, health, keyView, orgMe, statement } from './responses.js';

const AGENT_ID = 'The agent\'s id (1-128 of A-Z a-z 0-9 . _ : -); another org\'s agent is not found';
/** A static file of GET /docs. */
const asset = (summary: string, contentType: string): Operation => ({
  summary,
  tag: 'System',
  responses: { 200: { description: 'The file', contentType, headers: { 'Cache-Control': '`public, max-age=604800` (a week)' } } },
  errors: [],
});

/** System (health, the caller's org, keys, metrics, this document), agents and billing. */
export const SYSTEM_OPERATIONS: Readonly<Record<string, Operation>> = {
  'GET /health': {
    summary: 'Health: version and mode',
    description: 'Answers once the service is ready. While it starts, every path (this one too) answers 503 `unavailable` with Retry-After.',
    tag: 'System',
    responses: { 200: { description: 'Ready', schema: health } },
    errors: [503],
  },
  'GET /cluster/map': {
    summary: 'The partition map: which node owns each org',
    description:
      'For owner-aware clients (README, Owner-aware clients): hash the org as `hash` says, then send its traffic to `owners[partition]`. Advisory: any node takes any org\'s requests and forwards them to the owner, so a client that ignores the map, or holds an old one, still works. The owner changes as leases move (a node joining, leaving or dying): read it again now and then, and when the owner cannot be reached. Embedded mode: one partition, owned by this server.',
    tag: 'System',
    responses: { 200: { description: 'The map as this node knows it', schema: clusterMap, headers: { 'Cache-Control': '`no-store`' } } },
    errors: errors(KEY, READ),
  },
  'GET /orgs/me': {
    summary: 'The caller\'s org and key',
    tag: 'System',
    responses: { 200: { description: 'The org (its slug, creation and plan) and the key used', schema: orgMe } },
    errors: errors(KEY, READ),
  },
  'POST /admin/keys': {
    summary: 'Create a key',
    description: 'A new key of the caller\'s org with the scopes given. The secret is in this answer only; the service stores its SHA-256.',
    tag: 'System',
    body: createKeyBody,
    responses: { 201: { description: 'Created; `key` is the secret', schema: createdKey } },
    errors: errors(SCOPED, BODY),
  },
  'GET /admin/keys': {
    summary: 'List the org\'s keys',
    description: 'Every key of the org, revoked ones too (with `revoked_at`), oldest first. Never a secret or a digest.',
    tag: 'System',
    responses: { 200: { description: 'The keys', schema: z.array(keyView) } },
    errors: errors(SCOPED, READ),
  },
  'DELETE /admin/keys/:key_id': {
    summary: 'Revoke a key',
    description: 'Refused from the next request on (cluster: on every node within milliseconds); the key\'s open `GET /events/stream` connections write nothing more and are closed with 4401 `key revoked` (within about a second when idle). Revoking a revoked key answers it again, unchanged.',
    tag: 'System',
    params: { key_id: 'The key\'s id (`key_…`, from GET /admin/keys); another org\'s key is not found' },
    responses: { 200: { description: 'The key as it now is, with `revoked_at`', schema: keyView } },
    errors: errors(SCOPED, 404),
  },
  'GET /metrics': {
    security: 'metricsToken',
    summary: 'Prometheus metrics',
    description:
      'Mounted only when VIGIL_METRICS_TOKEN is set (else 404); answers only that token, sent as `Authorization: Bearer <token>` (an API key is refused). Counters and histograms of requests, ingest, batch sizes, commit latency, deliveries and replication lag; org names in labels only with VIGIL_METRICS_ORG_LABELS=1.',
    tag: 'System',
    responses: { 200: { description: 'Prometheus text format 0.0.4', contentType: 'text/plain; version=0.0.4; charset=utf-8', headers: { 'Cache-Control': '`no-store`' } } },
    errors: [401],
  },
  'GET /openapi.json': {
    summary: 'This document',
    description: 'The OpenAPI 3.1 document of every route this server mounts, generated from the routes and the zod schemas they validate with.',
    tag: 'System',
    responses: {
      200: {
        description: 'OpenAPI 3.1',
        schema: z.looseObject({ openapi: z.literal('3.1.0'), info: z.looseObject({ title: z.string(), version: z.string() }), paths: z.record(z.string(), z.unknown()) }),
        headers: { 'Cache-Control': '`no-cache`' },
      },
    },
    errors: [],
  },
  'GET /docs': {
    summary: 'This document, rendered',
    description: 'An HTML page rendering GET /openapi.json (Swagger UI, served from this origin).',
    tag: 'System',
    responses: { 200: { description: 'The page', contentType: 'text/html; charset=utf-8' } },
    errors: [],
  },
  // The page's own files (routes/docs.ts).
  'GET /docs/swagger-ui.css': asset('Swagger UI\'s stylesheet (GET /docs)', 'text/css; charset=utf-8'),
  'GET /docs/swagger-ui-bundle.js': asset('Swagger UI\'s script (GET /docs)', 'application/javascript; charset=utf-8'),
  'GET /docs/docs.js': asset('The script that starts Swagger UI (GET /docs)', 'application/javascript; charset=utf-8'),

  'POST /agents': {
    summary: 'Register an agent',
    description: 'Writes an `agent` ledger record. 409 if the agent_id is registered (retired ones too); 403 `plan_limit` past the plan\'s active agents.',
    tag: 'Agents',
    body: registerAgentBody,
    responses: { 201: { description: 'Registered', schema: agentView } },
    errors: errors(SCOPED, BODY, WRITE, 409),
  },
  'GET /agents': {
    summary: 'List the org\'s agents',
    description: 'Every agent of the org with its state, in registration order (the shape of the public list).',
    tag: 'Agents',
    query: z.object({ limit: intParam(1, 100, 50, 'Agents in the page'), offset: intParam(0, 1e9, 0, 'Agents skipped') }),
    responses: { 200: { description: 'A page of agents; `total` counts them all', schema: agentList } },
    errors: errors(KEY, READ, 400),
  },
  'GET /agents/:agent_id': {
    summary: 'Read an agent',
    tag: 'Agents',
    params: { agent_id: AGENT_ID },
    responses: { 200: { description: 'The agent and its state', schema: agentSummary } },
    errors: errors(KEY, READ, 404),
  },
  'PATCH /admin/agents/:agent_id': {
    summary: 'Change an agent',
    description:
      'Changes the fields sent (at least one). `public: true` lists it on the public routes while active; `public_links` replaces the list whole (an empty list clears it); `is_active: false` retires it, permanently (a retired agent takes no further change: 409). 403 `plan_limit` past the plan\'s public agents.',
    tag: 'Agents',
    params: { agent_id: AGENT_ID },
    body: updateAgentBody,
    responses: { 200: { description: 'The agent as it now is', schema: agentView } },
    errors: errors(SCOPED, BODY, WRITE, 404, 409),
  },

  'GET /billing/plan': {
    summary: 'The org\'s plan',
    tag: 'Billing',
    responses: { 200: { description: 'Plan, limits and price', schema: billingPlan } },
    errors: errors(KEY, READ),
  },
  'GET /billing/statement': {
    summary: 'A monthly statement',
    description: 'Usage in a UTC month, and its price against the plan in force now (overage lines for the limits it bills). A month before the org existed bills 0.00.',
    tag: 'Billing',
    query: z.object({ month: z.string().regex(MONTH).optional().describe('A UTC calendar month, YYYY-MM, not after the current one; default the current month') }),
    responses: { 200: { description: 'The statement', schema: statement } },
    errors: errors(KEY, READ, 400),
  },
};
