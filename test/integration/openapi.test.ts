import { operationIn } from '../support/openapi-statuses.js';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operationKey } from '../../src/http/openapi/document.js';
import { OPERATIONS } from '../../src/http/openapi/operations.js';
import type { Route } from '../../src/http/router.js';
import { haveChromium, launchChromium, watchProblems } from '../support/chromium.js';
import { keyFor, startFuzzTarget, type FuzzTarget } from '../support/fuzz-harness.js';
import { caseOf, httpMethod, isTwin, routeKey, target } from '../support/route-table.js';
import { send } from '../support/send.js';

/**
 * GET /openapi.json (DESIGN §11) against the service that serves it: valid OpenAPI 3.1 by an
 * independent validator, every mounted route in it, and every route's real answer (the route
 * table's successful request) matching the status and JSON schema the document gives. GET /docs
 * renders it in Chromium, under its CSP, with no console error.
 */
let t: FuzzTarget;
let doc: any;

beforeAll(async () => {
  t = await startFuzzTarget();
  const res = await fetch(`${t.server.url}/openapi.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/json');
  doc = await res.json();
}, 60_000);
afterAll(() => t?.close());

/** The document's operation for a mounted route (a collection's trailing slash dropped). */
const operationOf = (route: Pick<Route, 'method' | 'path'>): any => operationIn(doc, route);

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator)', async () => {
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 1)?.slice(0, 2000)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('describes every mounted route (and the WebSocket of /events/stream), and nothing else', () => {
    const missing = t.server.runtime.routes.filter((r) => operationOf(r) === undefined).map(routeKey);
    expect(missing, 'routes the document does not describe').toEqual([]);
    expect(operationOf({ method: 'get', path: '/events/stream' })?.responses['101']).toBeDefined();
    // And no operation of a route that is not mounted (the fuzz target mounts everything: demo
    // mode, metrics on): a route removed or renamed leaves no stale entry behind.
    const mounted = new Set([...t.server.runtime.routes.map(operationKey), 'GET /events/stream']);
    expect(Object.keys(OPERATIONS).filter((key) => !mounted.has(key))).toEqual([]);
  });

  it('gives each request schema from the zod schema the route validates with (POST /events)', () => {
    const body = operationOf({ method: 'post', path: '/events' }).requestBody.content['application/json'].schema;
    expect(body.required).toEqual(expect.arrayContaining(['agent_id', 'event_type']));
    expect(body.additionalProperties).toBe(false);
  });

  it('answers every route\'s successful request with a documented status and a body matching its schema', async () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addSchema(doc.components.schemas.Error, '#/components/schemas/Error');
    const problems: string[] = [];
    for (const route of t.server.runtime.routes) {
      if (isTwin(route)) continue;
      const req = caseOf(route).request(t.ids, t.fresh);
      const headers: Record<string, string> = {};
      const key = keyFor(t, route, 'admin');
      if (key !== null) headers.authorization = `Bearer ${key}`;
      if (req.body !== undefined) headers['content-type'] = 'application/json';
      const answer = await send(t.server.url, { method: httpMethod(route), path: target(route, req), headers, ...(req.body === undefined ? {} : { body: JSON.stringify(req.body) }) });
      const documented = operationOf(route).responses[String(answer.status)];
      if (documented === undefined) {
        problems.push(`${routeKey(route)}: answered ${answer.status}, not documented (${answer.text.slice(0, 120)})`);
        continue;
      }
      const schema = documented.content?.['application/json']?.schema;
      if (schema === undefined) continue;
      const validate = ajv.compile(schema);
      if (!validate(JSON.parse(answer.text))) problems.push(`${routeKey(route)} ${answer.status}: ${ajv.errorsText(validate.errors)}`);
    }
    expect(problems).toEqual([]);
  }, 60_000);

  it('documents the error body every error answer has', async () => {
    const ajv = new Ajv2020({ strict: false });
    const validate = ajv.compile(doc.components.schemas.Error);
    for (const [method, path] of [['GET', '/no/such/route'], ['GET', '/orgs/me'], ['POST', '/events']] as const) {
      const answer = await send(t.server.url, { method, path, headers: { 'content-type': 'application/json' }, body: method === 'POST' ? '{}' : undefined });
      expect(answer.status).toBeGreaterThanOrEqual(400);
      expect(validate(JSON.parse(answer.text)), `${method} ${path}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }
  });
});

describe.runIf(haveChromium())('GET /docs', () => {
  it('renders the document with Swagger UI served by Vigil, under a CSP with no inline script, and no console error', async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      const problems = watchProblems(page);
      const outside: string[] = [];
      const assets: string[] = [];
      page.on('request', (request) => {
        if (!request.url().startsWith(t.server.url)) outside.push(request.url());
        else if (request.url().includes('/docs/')) assets.push(new URL(request.url()).pathname + new URL(request.url()).search);
      });
      const res = await page.goto(`${t.server.url}/docs`);
      expect(res?.headers()['content-security-policy']).toContain("script-src 'self'");
      await page.locator('.opblock-summary-path', { hasText: '/events/batch' }).first().waitFor({ timeout: 20_000 });
      expect(await page.locator('.opblock').count()).toBeGreaterThan(40);
      expect(await page.locator('.info .title').first().textContent()).toContain('Vigil');
      expect(problems).toEqual([]);
      expect(outside, 'requests that left the server (a CDN?)').toEqual([]);
      // Cached for a week under URLs that carry the versions: an upgrade is fetched at once.
      expect(assets.sort()).toEqual(['/docs/docs.js', '/docs/swagger-ui-bundle.js', '/docs/swagger-ui.css'].map((a) => expect.stringMatching(new RegExp(`^${a}\\?v=\\d+\\.\\d+\\.\\d+-\\d+\\.\\d+\\.\\d+$`))));
    } finally {
      await browser.close();
    }
  }, 60_000);
});
