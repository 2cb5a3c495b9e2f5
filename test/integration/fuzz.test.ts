/**
 * HTTP fuzzing of every mounted route (runtime.routes, demo mode on) with fast-check against the
 * real service: mutated valid bodies, hostile shapes as raw JSON text (1e999, 5,000 levels of
 * nesting, bodies at and over 1 MiB, lone surrogates, `__proto__` members, duplicate members),
 * wrong envelopes, a wrong type in every field, hostile path params and queries. What must hold
 * for every answer is in `exercise` (test/support/fuzz-harness.ts).
 *
 * Bounded for CI (about 1,500 fuzz requests); VIGIL_FUZZ_RUNS=10 multiplies the random runs,
 * VIGIL_FUZZ_SEED replays a printed seed, VIGIL_FUZZ_SHRINK=1 shrinks a failure (slow: every
 * shrink step is a real request).
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ChainVerifier, rowFromExport } from '../../src/domain/ledger.js';
import type { Route } from '../../src/http/router.js';
import { errorBodyProblem } from '../support/answer-rules.js';
import { exercise, forgetState, keyFor, loopbackOnly, startFuzzTarget, statsTable, survives } from '../support/fuzz-harness.js';
import { chunked, cut, exchange, head } from '../support/raw-http.js';
import { envelopeBody, expectError, hostileBody, jsonType, mutatedBody, WRONG_TYPES, type BodyCase } from '../support/hostile.js';
import { fieldPath, pathsOf, withValue } from '../support/json-text.js';
import { caseOf, fillRaw, findCase, httpMethod, isTwin, paramNames, routeKey, takesBody, target, unknownRoutes, wrongAuth } from '../support/route-table.js';
import { send, type Outgoing } from '../support/send.js';
import { StatusLedger } from '../support/openapi-statuses.js';
import { ADMIN_KEY, call, parseLines } from '../support/server.js';

const RUNS = Math.max(1, Number(process.env.VIGIL_FUZZ_RUNS ?? '1'));
const SEED = process.env.VIGIL_FUZZ_SEED;
/** Per property test: generous, and scaled with the runs. */
const TIMEOUT = 60_000 * RUNS;
fc.configureGlobal({
  ...(SEED === undefined ? {} : { seed: Number(SEED) }),
  endOnFailure: process.env.VIGIL_FUZZ_SHRINK !== '1',
});

const fuzz = await startFuzzTarget();
/** What the table requests and body cases (each on its route's own path) were answered: the document must list each. */
const answered = new StatusLedger();
const mounted = fuzz.server.runtime.routes;
// Routes missing from the table fail the first test, by name; the others are fuzzed.
const routes = mounted.filter((r) => findCase(r) !== undefined);
afterAll(async () => {
  console.log(`fuzz: answers by route and status\n${statsTable(fuzz)}`);
  await fuzz.close();
});

/** The route's request with `key`, and the case's body and Content-Type (none when null). */
function request(route: Route, path: string, body: Pick<BodyCase, 'body' | 'contentType'> | null, key: string | null): Outgoing {
  const headers: Record<string, string> = key === null ? {} : { authorization: `Bearer ${key}` };
  const built = body?.body();
  if (body != null && body.contentType !== null) headers['content-type'] = body.contentType;
  return { method: httpMethod(route), path, headers, ...(built === undefined ? {} : { body: built }) };
}

/** The table's request for `route`: path with valid params, and its valid body (`{}` when it takes none). */
function valid(route: Route) {
  const req = caseOf(route).request(fuzz.ids, fuzz.fresh);
  return { path: target(route, req), base: req.body ?? {}, hasBody: req.body !== undefined };
}

describe('the route table', () => {
  it('knows every mounted route (a new route must be added to test/support/route-table.ts)', () => {
    expect(unknownRoutes(mounted)).toEqual([]);
    expect(wrongAuth(mounted)).toEqual([]);
    expect(mounted.some((r) => r.path.startsWith('/studio'))).toBe(true); // demo routes are mounted
  });

  it("answers each route's table request (the fuzz starts from valid requests)", async () => {
    const failed: string[] = [];
    for (const route of routes) {
      const { path, base, hasBody } = valid(route);
      const body = hasBody ? { body: () => JSON.stringify(base), contentType: 'application/json' } : null;
      const answer = await exercise(fuzz, route, request(route, path, body, keyFor(fuzz, route)), `table request of ${routeKey(route)}`);
      answered.note(route, answer.status);
      if (answer.status >= 300) failed.push(`${routeKey(route)} → ${answer.status} ${answer.text.slice(0, 200)}`);
    }
    expect(failed).toEqual([]);
  });
});

for (const route of routes.filter(takesBody)) {
  describe(`${routeKey(route)} bodies`, () => {
    const { path, base, hasBody } = valid(route);
    const key = keyFor(fuzz, route);
    // A trailing-slash twin shares its handler with the route the table names: a lighter pass.
    const share = isTwin(route) ? 0.25 : 1;
    const runs = (n: number) => Math.ceil(n * share * RUNS);
    const property = (arb: fc.Arbitrary<BodyCase>) =>
      fc.asyncProperty(arb, async (c) => {
        const req = request(route, path, c, key);
        fc.pre(loopbackOnly(route, req.body));
        answered.note(route, (await exercise(fuzz, route, req, c.label, c.expect)).status);
      });

    it('mutated valid bodies', async () => {
      await fc.assert(property(mutatedBody(base)), { numRuns: runs(12) });
    }, TIMEOUT);

    it('hostile shapes: non-finite numbers, deep nesting, 1 MiB, unicode, prototype and duplicate members', async () => {
      await fc.assert(property(hostileBody(base)), { numRuns: runs(20) });
    }, TIMEOUT);

    it('wrong envelopes: content types, empty, malformed, not UTF-8', async () => {
      await fc.assert(property(envelopeBody(base)), { numRuns: runs(8) });
    }, TIMEOUT);

    // Only where the route reads a body: the others ignore it.
    if (hasBody && !isTwin(route)) it('a wrong type in every field: 400 naming the field, or accepted', async () => {
      const freeform = caseOf(route).freeform ?? [];
      for (const { path: at } of pathsOf(base)) {
        const name = fieldPath(at);
        if (freeform.some((f) => name.startsWith(`${f}.`))) continue;
        const original = at.reduce<any>((v, k) => v[k], base);
        for (const wrong of WRONG_TYPES.filter((w) => jsonType(w) !== jsonType(original))) {
          const text = JSON.stringify(withValue(base, at, wrong));
          const label = `${name} = ${JSON.stringify(wrong)}`;
          const refused = expectError(400, 'validation_failed');
          const answer = await exercise(fuzz, route, request(route, path, { body: () => text, contentType: 'application/json' }, key), label, (a) => {
            if (a.status < 300) return null;
            const problem = refused(a);
            if (problem !== null) return problem;
            const details: { path: string }[] = JSON.parse(a.text).error.details ?? [];
            return details.some((d) => d.path === name || d.path.startsWith(`${name}.`))
              ? null
              : `no detail names ${name}: ${JSON.stringify(details)}`;
          });
          answered.note(route, answer.status);
        }
      }
    });
  });
}

/** Path segments as they go on the wire: hostile to parsers, decoders and lookups. */
const HOSTILE_SEGMENTS = [
  '', '0', '-1', '1.5', '1e3', '9007199254740993', '99999999999999999999', 'NaN', '%00', '%ff', '%2F', '%2e%2e', '..', '.', '%20',
  '__proto__', 'constructor', 'prototype', 'toString', '%F0%9F%98%80', '%ED%A0%80', '%E2%80%A8', "'%20OR%201=1", '%3Cscript%3E',
  'a'.repeat(129), 'a'.repeat(5000), '%25', '%zz', 'studio-clinical', 'acme',
];
const QUERY_NAMES = ['since_seq', 'until_seq', 'agent_id', 'head', 'month', 'status', 'limit', 'offset', '__proto__', 'constructor', 'x'];
const QUERY_VALUES = ['', '-1', '0', '1', '50', '101', '1e3', 'NaN', '999999999999999999999', '%00', '%zz', 'pending', 'decided', 'paused', 'retired', 'deployed', '2026-13', '9999-12', '0'.repeat(64), 'A'.repeat(64), 'x'.repeat(3000), '%ED%A0%80'];
const ACCEPTS = ['application/gzip', '*/*', 'text/html', 'application/json;q=0', 'application/gzip;q=0, */*', 'x'.repeat(2000)];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

for (const route of routes) {
  describe(`${routeKey(route)} params and queries`, () => {
    it('hostile path params, query strings, methods and Accept headers', async () => {
      const req = caseOf(route).request(fuzz.ids, fuzz.fresh);
      const validQuery = Object.entries(req.query ?? {}).map(([k, v]) => `${k}=${encodeURIComponent(v)}`);
      const segment = (name: string) => fc.oneof(fc.constant(encodeURIComponent(req.params?.[name] ?? '')), fc.constantFrom(...HOSTILE_SEGMENTS));
      const params = fc.record(Object.fromEntries(paramNames(route).map((n) => [n, segment(n)])));
      const pair = fc.tuple(fc.constantFrom(...QUERY_NAMES), fc.oneof(fc.constantFrom(...QUERY_VALUES), fc.string({ maxLength: 8 }).map(encodeURIComponent)));
      const query = fc.oneof(fc.constant(validQuery), fc.array(pair.map(([k, v]) => `${k}=${v}`), { maxLength: 4 }), fc.constant(['%', '&&', '=', 'a=%']));
      const method = fc.oneof({ weight: 5, arbitrary: fc.constant(httpMethod(route)) }, { weight: 1, arbitrary: fc.constantFrom(...METHODS) });
      const headers = fc.record({ accept: fc.constantFrom(...ACCEPTS), 'if-none-match': fc.constantFrom('*', 'W/"x"', '"abc"') }, { requiredKeys: [] });
      await fc.assert(
        fc.asyncProperty(params, query, method, headers, async (p, q, m, h) => {
          const path = fillRaw(route.path, p) + (q.length === 0 ? '' : `?${q.join('&')}`);
          const body = req.body !== undefined && m !== 'GET' ? { body: () => JSON.stringify(req.body), contentType: 'application/json' } : null;
          const out = { ...request(route, path, body, keyFor(fuzz, route)), method: m };
          fc.pre(loopbackOnly(route, out.body));
          await exercise(fuzz, route, { ...out, headers: { ...out.headers, ...h } }, `${m} ${path.slice(0, 120)}`);
        }),
        { numRuns: 8 * RUNS },
      );
    }, TIMEOUT);
  });
}

describe('framing over a raw socket', () => {
  const port = fuzz.server.runtime.port;
  const bodyRoutes = routes.filter((r) => takesBody(r) && !isTwin(r));

  function rawRequest(route: Route, path: string, c: BodyCase, chunks: number[], key: string | null): Buffer {
    const body = c.body();
    const bytes = body === undefined ? Buffer.alloc(0) : Buffer.from(body);
    const headers: Record<string, string> = { host: '127.0.0.1', ...(key === null ? {} : { authorization: `Bearer ${key}` }) };
    if (c.contentType !== null) headers['content-type'] = c.contentType;
    return Buffer.concat([Buffer.from(head(httpMethod(route), path, { ...headers, 'transfer-encoding': 'chunked' }), 'latin1'), chunked(bytes, chunks)]);
  }

  it('a chunked body cut anywhere, sent in pieces, is answered as with Content-Length', async () => {
    const cases = fc.constantFrom(...bodyRoutes).chain((route) => {
      const { path, base } = valid(route);
      return fc.record({
        route: fc.constant(route),
        path: fc.constant(path),
        body: fc.oneof(mutatedBody(base), hostileBody(base), envelopeBody(base)),
        chunks: fc.array(fc.integer({ min: 1, max: 64 }), { maxLength: 8 }),
        writes: fc.array(fc.nat({ max: 400 }), { maxLength: 6 }),
      });
    });
    await fc.assert(
      fc.asyncProperty(cases, async ({ route, path, body, chunks, writes }) => {
        const bytes = rawRequest(route, path, body, chunks, keyFor(fuzz, route));
        const req: Outgoing = { method: httpMethod(route), path, headers: { 'transfer-encoding': 'chunked' }, body: bytes };
        fc.pre(loopbackOnly(route, body.body()));
        await exercise(fuzz, route, req, `chunked ${body.label}`, body.expect, async () => {
          const { answers, closed } = await exchange(port, cut(bytes, writes), { expect: 1 });
          if (answers[0] === undefined) throw new Error(`no answer (connection ${closed ? 'closed' : 'left open'})`);
          return answers[0];
        });
      }),
      { numRuns: 40 * RUNS },
    );
  }, TIMEOUT);

  // uWebSockets.js closes a connection on which a request arrives, in the same read, behind one
  // still unanswered (README "Deployment"): a pipeline may be cut short, never answered out of
  // order or with another request's answer, an unanswered write is not recorded, and the server
  // carries on.
  it('pipelined requests in one write: answers in order, or the connection closed; unanswered, unrecorded', async () => {
    const health = head('GET', '/health', { host: '127.0.0.1' });
    const auth = (key: string | null): Record<string, string> => ({ host: '127.0.0.1', ...(key === null ? {} : { authorization: `Bearer ${key}` }) });
    const event = JSON.stringify({ agent_id: fuzz.ids.agent, event_type: 'output_generated', payload: {} });
    const post = head('POST', '/events/', { ...auth(ADMIN_KEY), 'content-type': 'application/json', 'content-length': String(event.length) }) + event;
    const pipelines: [string, string][] = routes
      .filter((r) => r.method === 'get')
      .map((r) => [`health, ${routeKey(r)}, health`, health + head('GET', valid(r).path, auth(keyFor(fuzz, r))) + health]);
    pipelines.push(['health, POST /events/, health', health + post + health]);
    const failures: string[] = [];
    const ledgerRows = async (): Promise<number> => (await send(fuzz.server.url, { method: 'GET', path: '/audit/export', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).text.split('\n').filter(Boolean).length;
    for (const [what, text] of pipelines) {
      const before = await ledgerRows();
      const { closed, answers } = await exchange(port, [Buffer.from(text, 'latin1')], { expect: 3, quietMs: 1_000 });
      const recorded = (await ledgerRows()) - before;
      const acknowledged = what.includes('POST') && answers.length >= 2 && answers[1]!.status === 200 ? 1 : 0;
      if (recorded !== acknowledged) failures.push(`${what}: ${recorded} records written, ${acknowledged} acknowledged`);
      const wrong = answers.findIndex((a, i) => (i === 1 ? a.status >= 500 || (a.status >= 400 && errorBodyProblem(a) !== null) : a.status !== 200 || !a.text.includes('"status":"ok"')));
      if (wrong >= 0) failures.push(`${what}: answer ${wrong + 1} is ${answers[wrong]!.status} ${answers[wrong]!.text.slice(0, 120)}`);
      if (answers.length < 3 && !closed) failures.push(`${what}: ${answers.length} answers of 3, and the connection left open`);
    }
    // The POST may have been recorded unanswered (as documented): the state is read afresh.
    forgetState();
    expect(failures).toEqual([]);
    const alive = await send(fuzz.server.url, { method: 'GET', path: '/health' });
    expect(alive.status).toBe(200);
  });

  it('broken framing: the server survives, records nothing, and any answer is the JSON error', async () => {
    const events = (extra: Record<string, string>) =>
      head('POST', '/events/', { host: '127.0.0.1', authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json', ...extra });
    const body = JSON.stringify({ agent_id: fuzz.ids.agent, event_type: 'output_generated', payload: {} });
    const broken: [string, string][] = [
      ['a body cut short, then closed', events({ 'content-length': String(body.length + 50) }) + body],
      ['Content-Length and Transfer-Encoding both', events({ 'content-length': '5', 'transfer-encoding': 'chunked' }) + `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`],
      ['two different Content-Lengths', events({ 'content-length': String(body.length) }).replace('\r\n\r\n', '\r\ncontent-length: 3\r\n\r\n') + body],
      ['a negative Content-Length', events({ 'content-length': '-1' }) + body],
      ['a Content-Length of 10^20', events({ 'content-length': '100000000000000000000' }) + body],
      ['a Content-Length with letters', events({ 'content-length': '12abc' }) + body],
      ['a chunk size that is not hex', events({ 'transfer-encoding': 'chunked' }) + `zz\r\n${body}\r\n0\r\n\r\n`],
      ['a chunk size of 2^64-1', events({ 'transfer-encoding': 'chunked' }) + `ffffffffffffffff\r\n${body}\r\n`],
      ['no last chunk, then closed', events({ 'transfer-encoding': 'chunked' }) + `${body.length.toString(16)}\r\n${body}\r\n`],
      ['an unknown method', 'BREW /events/ HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n'],
      ['HTTP/1.0 without Host', 'GET /health HTTP/1.0\r\n\r\n'],
      ['bytes that are not HTTP', '\u0000\u0001\u0002 garbage\r\n\r\n'],
      ['a NUL in a header value', events({ 'x-note': 'a\u0000b', 'content-length': String(body.length) }) + body],
      ['a header of 100 KB', head('GET', '/health', { host: '127.0.0.1', 'x-big': 'a'.repeat(100_000) })],
      ['a request line of 100 KB', head('GET', `/agents/${'a'.repeat(100_000)}`, { host: '127.0.0.1', authorization: `Bearer ${ADMIN_KEY}` })],
    ];
    for (const [what, text] of broken) {
      await survives(fuzz, what, async () => (await exchange(port, [Buffer.from(text, 'latin1')], { expect: 1, end: true, quietMs: 500 })).answers);
    }
  });
});

describe('after the fuzz', () => {
  it('answered each route only with statuses its OpenAPI operation lists', async () => {
    const doc = (await call(fuzz.server.url, 'GET', '/openapi.json', { key: null })).body;
    expect(answered.undocumented(doc)).toEqual([]);
  });

  it('the process is alive, the ledger has no gaps and its chain verifies, offline and on the server', async () => {
    const rows = parseLines((await call(fuzz.server.url, 'GET', '/audit/export')).text);
    const verifier = new ChainVerifier();
    for (const row of rows) verifier.push(rowFromExport(row));
    const report = verifier.report();
    expect(report).toMatchObject({ ok: true, first_bad_seq: null, length: rows.length });
    expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
    const verify = await call(fuzz.server.url, 'GET', `/audit/${fuzz.ids.agent}/verify`, { key: ADMIN_KEY });
    expect(verify.body).toMatchObject({ ok: true, head: report.head, length: rows.length });
  });
});
