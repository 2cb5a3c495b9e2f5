import { z } from 'zod';
import { VERSION } from '../../version.js';
import { STATUS_OF } from '../errors.js';
import { httpMethod, type Route } from '../router.js';
import { TAGS, type Answer, type Operation } from './operation.js';

/** DESIGN §4: every error answer's body. */
const errorBody = z.strictObject({
  error: z.strictObject({
    code: z.enum(Object.keys(STATUS_OF) as [string, ...string[]]).describe('Stable, machine-readable: see the README\'s error codes'),
    message: z.string().describe('For humans; may change'),
    details: z.array(z.strictObject({ path: z.string(), message: z.string() })).optional().describe('Validation errors: each field at fault (a dotted path) and what is wrong with it'),
  }),
});

const ERROR_TEXT: Record<number, string> = {
  400: 'Bad request: the body, query or a header is invalid (`details` names each field)',
  401: 'No valid key: missing, malformed, unknown or revoked',
  403: 'The key lacks the scope, or the plan does not allow it',
  404: 'Not found (another org\'s resources are not found either)',
  409: 'Conflict with the current state (or an idempotency key reused with another body)',
  413: 'The body is over 1 MiB',
  415: 'The body is not application/json',
  422: 'Refused: the record carries protected health information',
  429: 'Too many: a rate limit, the monthly quota, or the org writer\'s queue is full (`Retry-After`)',
  500: 'Internal error (logged)',
  503: 'Unavailable for a moment: starting, a tree rebuilding, a cluster node catching up (`Retry-After`)',
};

/** The operations document, and the mounted routes it lacks an operation for. */
export interface BuiltDocument {
  document: Record<string, unknown>;
  undocumented: string[];
}

/** An operation's key: `GET /public/agents/:org`, a collection's trailing slash dropped. */
export function operationKey(route: Pick<Route, 'method' | 'path'>): string {
  const path = route.path.length > 1 && route.path.endsWith('/') ? route.path.slice(0, -1) : route.path;
  return `${httpMethod(route.method)} ${path}`;
}

/**
 * The OpenAPI 3.1 document of the mounted routes (GET /openapi.json): paths, parameters and
 * auth from the routes themselves, the rest from `operations` (see Operation), request schemas
 * from the zod schemas the handlers validate with (zod's JSON Schema output, 2020-12 as OpenAPI
 * 3.1 uses). `extra` documents what is not a Route (the WebSocket upgrade of /events/stream).
 */
export function openApiDocument(routes: readonly Pick<Route, 'method' | 'path' | 'auth'>[], operations: Readonly<Record<string, Operation>>, baseUrl: string): BuiltDocument {
  const paths: Record<string, Record<string, unknown>> = {};
  const undocumented: string[] = [];
  const seen = new Set<string>();
  for (const route of routes) {
    const key = operationKey(route);
    if (seen.has(key)) continue;
    seen.add(key);
    const operation = operations[key];
    if (operation === undefined) {
      undocumented.push(key);
      continue;
    }
    const [method, path] = key.split(' ') as [string, string];
    (paths[openApiPath(path)] ??= {})[method.toLowerCase()] = operationObject(key, route.auth, path, operation);
  }
  const errors = Object.fromEntries(
    Object.entries(ERROR_TEXT).map(([status, description]) => [
      `Error${status}`,
      {
        description,
        // 429 and 503 say when to come back.
        ...(status === '429' || status === '503' ? { headers: { 'Retry-After': { description: 'Seconds to wait before trying again', schema: { type: 'string', pattern: '^[0-9]+$' } } } } : {}),
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      },
    ]),
  );
  return {
    undocumented,
    document: {
      openapi: '3.1.0',
      info: {
        title: 'Vigil',
        version: VERSION,
        summary: 'Agent behavior governance: a gate decision for every event, and a hash-chained, append-only ledger per organization.',
        description:
          'Every keyed route takes `Authorization: Bearer <key>`. A key belongs to one org and holds scopes (`events:write`, `review`, `admin`, `audit:read`); a route needing a scope says so. Errors share one body (`Error`). This document is generated from the routes mounted and the zod schemas they validate with.',
      },
      servers: [{ url: baseUrl }],
      tags: TAGS.map((name) => ({ name })),
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'An org\'s API key (`vgl_…`), made with `POST /admin/keys` or `npm run vigil -- keys create`.' },
          metricsToken: { type: 'http', scheme: 'bearer', description: 'The value of VIGIL_METRICS_TOKEN (GET /metrics only).' },
          sandboxKey: { type: 'http', scheme: 'bearer', description: 'A record-scoring sandbox key from `POST /api/v1/keys` (the /api/v1 routes only).' },
        },
        schemas: { Error: jsonSchema(errorBody, 'output') },
        responses: errors,
      },
      paths,
    },
  };
}

/** `/public/agents/:org` → `/public/agents/{org}`; a trailing `*` → `{path}`. */
function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_]+)/g, '{$1}').replace(/\*$/, '{path}');
}

function operationObject(key: string, auth: Route['auth'], path: string, op: Operation): Record<string, unknown> {
  const parameters: Record<string, unknown>[] = [];
  for (const name of [...path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]!)) {
    parameters.push({ name, in: 'path', required: true, schema: { type: 'string' }, ...(op.params?.[name] === undefined ? {} : { description: op.params[name] }) });
  }
  if (path.endsWith('*')) parameters.push({ name: 'path', in: 'path', required: true, schema: { type: 'string' }, description: op.params?.['*'] ?? 'The rest of the path' });
  if (op.query !== undefined) {
    for (const [name, field] of Object.entries(op.query.shape)) {
      const schema = jsonSchema(field as z.ZodType, 'input');
      const { description, ...rest } = schema as { description?: string };
      parameters.push({ name, in: 'query', required: !(field as z.ZodType).safeParse(undefined).success, schema: rest, ...(description === undefined ? {} : { description }) });
    }
  }
  for (const [name, header] of Object.entries(op.headers ?? {})) {
    parameters.push({ name, in: 'header', required: header.required === true, schema: { type: 'string' }, description: header.description });
  }
  const description = describeAuth(op.description, auth);
  const responses: Record<string, unknown> = {};
  for (const [status, answer] of Object.entries(op.responses)) responses[status] = answerObject(answer);
  for (const status of op.errors) responses[String(status)] = { $ref: `#/components/responses/Error${status}` };
  return {
    operationId: key.replace(/[^A-Za-z0-9]+/g, '_').replace(/_+$/, '').toLowerCase(),
    summary: op.summary,
    ...(description === undefined ? {} : { description }),
    tags: [op.tag],
    security: op.security !== undefined ? [{ [op.security]: [] }] : auth === 'none' ? [] : [{ apiKey: auth === 'key' ? [] : [auth] }],
    ...(parameters.length === 0 ? {} : { parameters }),
    ...(op.body === undefined ? {} : { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(op.body, 'input') } } } }),
    responses,
  };
}

function describeAuth(description: string | undefined, auth: Route['auth']): string | undefined {
  const needs = auth === 'none' || auth === 'key' ? null : `Needs a key with the \`${auth}\` scope.`;
  return [description, needs].filter((s) => s != null).join('\n\n') || undefined;
}

function answerObject(answer: Answer): Record<string, unknown> {
  const headers = answer.headers === undefined ? {} : { headers: Object.fromEntries(Object.entries(answer.headers).map(([name, description]) => [name, { description, schema: { type: 'string' } }])) };
  if (answer.schema !== undefined) return { description: answer.description, ...headers, content: { 'application/json': { schema: jsonSchema(answer.schema, 'output') } } };
  if (answer.contentType !== undefined) return { description: answer.description, ...headers, content: { [answer.contentType]: { schema: { type: 'string' } } } };
  return { description: answer.description, ...headers };
}

/** zod's JSON Schema (2020-12, OpenAPI 3.1's dialect) of `schema`, without the `$schema` line. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
}
