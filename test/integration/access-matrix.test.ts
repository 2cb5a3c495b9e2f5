/**
 * Org isolation and scope matrices, generated from the mounted routes (runtime.routes, demo mode
 * on): for every keyed route, no key or a bad key is 401 and a key of the org lacking the route's
 * scope is 403; a key of another org holding every scope, naming org A's agents, webhooks, held
 * actions, studio agents and export windows, gets what a name that exists nowhere gets (403 or
 * 404), never reads A's private data, and leaves A's state exactly as it was; public routes
 * answer a key as their contract says. Routes missing from test/support/route-table.ts fail the
 * first test, by name.
 */
import { StatusLedger } from '../support/openapi-statuses.js';
import { afterAll, describe, expect, it } from 'vitest';
import type { Route } from '../../src/http/router.js';
import { errorBodyProblem, errorCode } from '../support/answer-rules.js';
import { headSeq, METRICS_TOKEN, orgSnapshot, seedOrg, settingUp, startTargetServer } from '../support/org-fixture.js';
import { caseOf, findCase, httpMethod, routeKey, target, unknownRoutes, wrongAuth, type OrgIds } from '../support/route-table.js';
import { send, type Answer } from '../support/send.js';
import { ADMIN_KEY, call, ORG, runCli } from '../support/server.js';

const OTHER = 'globex';
const SCOPES = ['events:write', 'review', 'admin'] as const;

const { server, receiver, close } = await startTargetServer();
const { url } = server;
afterAll(close);

const { a, otherKey, otherLength, only, allBut, sandboxKey } = await settingUp(close, async () => {
  const seeded = await seedOrg(url, ADMIN_KEY, ORG, receiver.port);
  const cli = await runCli(['keys', 'create', '--org', OTHER, '--scopes', SCOPES.join(',')], { VIGIL_DATA_DIR: server.dataDir });
  if (cli.code !== 0) throw new Error(`keys create failed: ${cli.stderr}`);
  const keyOfB = cli.stdout.trim().split('\n').at(-1)!;
  // Org B has data of its own (so that its reads are not trivially empty), and its studio seeded.
  await call(url, 'POST', '/agents/', { key: keyOfB, body: { agent_id: `${OTHER}-agent`, name: 'B agent' } });
  await call(url, 'POST', '/events/', { key: keyOfB, body: { agent_id: `${OTHER}-agent`, event_type: 'output_generated', payload: {} } });
  await call(url, 'GET', '/studio/agents', { key: keyOfB });
  /** Keys of org A: one per scope, and one holding every scope but that one. */
  const one: Record<string, string> = {};
  const others: Record<string, string> = {};
  for (const scope of SCOPES) {
    one[scope] = (await call(url, 'POST', '/admin/keys', { body: { scopes: [scope] } })).body.key;
    others[scope] = (await call(url, 'POST', '/admin/keys', { body: { scopes: SCOPES.filter((s) => s !== scope) } })).body.key;
  }
  const sandbox: string = (await call(url, 'POST', '/api/v1/keys', { key: null, body: { email: 'matrix@example.test' } })).body.key;
  return { a: seeded, otherKey: keyOfB, otherLength: await headSeq(url, keyOfB), only: one, allBut: others, sandboxKey: sandbox };
});

/** Names of things that exist in no org; the same shape as org A's. */
const ghost: OrgIds = {
  ...a.ids,
  agent: 'ghost-agent',
  publicAgent: 'ghost-public',
  heldAction: 987_654,
  webhook: 987_654,
  spareWebhook: 987_655,
  spareKey: 'key_0000000000000000',
  studioAgent: 'ghost-studio-000000',
  chatAgent: 'ghost-chat-000000',
};
/**
 * Org A's resources as org B names them. Export windows and receiver URLs are B's own: they are
 * not resources of A (and B would only read back the URL it sent).
 */
const foreign: OrgIds = { ...a.ids, ledgerLength: otherLength, hookUrl: `http://receiver.test:${receiver.port}/${OTHER}-hook` };
const ghostForB: OrgIds = { ...ghost, ledgerLength: otherLength, hookUrl: foreign.hookUrl };

let n = 0;
const fresh = (): string => `m${++n}`;
const hookPath = new URL(a.ids.hookUrl).pathname;
const hooksOfA = (): number => receiver.received.filter((r) => r.path === hookPath).length;
// Taken before any request below; compared once they all ran.
const before = await orgSnapshot(url, ADMIN_KEY, a.ids);
const hooksBefore = hooksOfA();

const mounted = server.runtime.routes;
const known = mounted.filter((r) => findCase(r) !== undefined);
const keyed = known.filter((r) => r.auth !== 'none');

/** Every status a route answered here: the document must list each. */
const answered = new StatusLedger();

async function sendAs(route: Route, ids: OrgIds, authorization: string | null, extra: Record<string, string> = {}): Promise<Answer> {
  const req = caseOf(route).request(ids, fresh);
  const headers: Record<string, string> = { ...extra };
  if (authorization !== null) headers.authorization = authorization;
  if (req.body !== undefined) headers['content-type'] = 'application/json';
  const answer = await send(url, { method: httpMethod(route), path: target(route, req), headers, ...(req.body === undefined ? {} : { body: JSON.stringify(req.body) }) });
  answered.note(route, answer.status);
  return answer;
}

/** The answer is the JSON error `code` with `status`. */
function expectError(answer: Answer, status: number, code: string, what: string): void {
  expect(answer.status, `${what}: ${answer.text.slice(0, 200)}`).toBe(status);
  expect(errorBodyProblem(answer), what).toBeNull();
  expect(errorCode(answer), what).toBe(code);
}

function expectNoSecretOfA(answer: Pick<Answer, 'text'>, what: string): void {
  for (const secret of a.secrets) expect(answer.text.includes(secret), `${what} shows org A's ${secret}`).toBe(false);
}

describe('the route table', () => {
  it('knows every mounted route, with the auth it is mounted with', () => {
    expect(unknownRoutes(mounted)).toEqual([]);
    expect(wrongAuth(mounted)).toEqual([]);
    expect(mounted.some((r) => r.path.startsWith('/chat'))).toBe(true); // demo routes are mounted
  });
});

const BAD_AUTHORIZATION: [string, string | null][] = [
  ['no Authorization', null],
  ['an empty Bearer', 'Bearer'],
  ['an unknown key', `Bearer vgl_${'x'.repeat(43)}`],
  ["the admin key, one character short", `Bearer ${ADMIN_KEY.slice(0, -1)}`],
  ['the admin key upper-cased', `Bearer ${ADMIN_KEY.toUpperCase()}`],
  ['the admin key in Basic', `Basic ${Buffer.from(`${ADMIN_KEY}:`).toString('base64')}`],
  ['the admin key without a scheme', ADMIN_KEY],
  ['the admin key and more', `Bearer ${ADMIN_KEY} ${ADMIN_KEY}`],
  ['a sandbox key of the scoring interface', `Bearer ${sandboxKey}`],
  ['the metrics token', `Bearer ${METRICS_TOKEN}`],
];

describe('keyed routes without a valid key: 401', () => {
  for (const route of keyed) {
    it(routeKey(route), async () => {
      for (const [what, authorization] of BAD_AUTHORIZATION) {
        expectError(await sendAs(route, a.ids, authorization), 401, 'unauthorized', `${routeKey(route)} with ${what}`);
      }
    });
  }
});

describe("a key of the route's org lacking the route's scope: 403", () => {
  for (const route of keyed.filter((r) => r.auth !== 'key')) {
    it(`${routeKey(route)} (needs ${route.auth})`, async () => {
      expectError(await sendAs(route, a.ids, `Bearer ${allBut[route.auth]}`), 403, 'forbidden', `${routeKey(route)} without ${route.auth}`);
    });
  }
});

describe("another org's key naming org A's resources: what a name that exists nowhere gets", () => {
  for (const route of keyed.filter((r) => caseOf(r).names === true)) {
    it(routeKey(route), async () => {
      const theirs = await sendAs(route, foreign, `Bearer ${otherKey}`);
      const nowhere = await sendAs(route, ghostForB, `Bearer ${otherKey}`);
      const what = `${routeKey(route)} by org B naming org A's resources`;
      expect(theirs.status, `${what}: ${theirs.text.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
      expect(theirs.status, what).toBeLessThan(500);
      if (route.path.includes(':')) expect([403, 404], `${what}: ${theirs.status}`).toContain(theirs.status);
      expect(errorBodyProblem(theirs), what).toBeNull();
      expect({ status: theirs.status, code: errorCode(theirs) }, `${what}, against a name that exists nowhere`).toEqual({ status: nowhere.status, code: errorCode(nowhere) });
      expectNoSecretOfA(theirs, what);
    });
  }
});

describe("another org's key on routes that name nothing: only its own org's data", () => {
  for (const route of keyed.filter((r) => caseOf(r).names !== true)) {
    it(routeKey(route), async () => {
      const answer = await sendAs(route, foreign, `Bearer ${otherKey}`);
      const what = `${routeKey(route)} by org B`;
      expect(answer.status, `${what}: ${answer.text.slice(0, 200)}`).toBeLessThan(300);
      expectNoSecretOfA(answer, what);
      if (routeKey(route) === 'GET /orgs/me') expect(JSON.parse(answer.text).slug).toBe(OTHER);
    });
  }
});

describe("another org's key with org A's seq windows", () => {
  it('reads and bundles only its own records', async () => {
    const window = `since_seq=0&until_seq=${a.ids.ledgerLength}`;
    const asB = { key: otherKey };
    const exported = await call(url, 'GET', `/audit/export?${window}`, asB);
    expect(exported.status).toBe(200);
    expectNoSecretOfA(exported, 'GET /audit/export by org B');
    const lengthOfB = await headSeq(url, otherKey);
    expect(exported.text.split('\n').filter((l) => l !== '').length).toBe(Math.min(lengthOfB, a.ids.ledgerLength));
    const bundle = await call(url, 'POST', '/exports/bundle', { ...asB, body: { since_seq: 0, until_seq: a.ids.ledgerLength } });
    // A window past B's own ledger is refused; one within it bundles B's records.
    expect(bundle.status, bundle.text.slice(0, 200)).toBe(a.ids.ledgerLength > lengthOfB ? 400 : 200);
    expectNoSecretOfA(bundle, 'POST /exports/bundle by org B');
    expectNoSecretOfA(await call(url, 'GET', '/exports', asB), 'GET /exports by org B');
  });
});

describe('public routes sent a key anyway', () => {
  for (const route of known.filter((r) => r.auth === 'none')) {
    const { withKey, ownKey } = caseOf(route);
    it(`${routeKey(route)}: ${withKey} with a key, and answers without one`, async () => {
      const withVigilKey = await sendAs(route, a.ids, `Bearer ${ADMIN_KEY}`);
      expect(withVigilKey.status, withVigilKey.text.slice(0, 200)).toBe(withKey);
      if (withKey! >= 400) expect(errorBodyProblem(withVigilKey)).toBeNull();
      const plain = await sendAs(route, a.ids, ownKey === 'sandbox' ? `Bearer ${sandboxKey}` : ownKey === 'metrics' ? `Bearer ${METRICS_TOKEN}` : null);
      expect(plain.status, plain.text.slice(0, 200)).toBeLessThan(300);
    });
  }
});

describe("org A's state", () => {
  it('is exactly as it was: no request above changed it, nor reached its webhook receiver', async () => {
    expect(await orgSnapshot(url, ADMIN_KEY, a.ids)).toEqual(before);
    expect(hooksOfA()).toBe(hooksBefore);
  });
});

describe("keys of the route's org with the scope: past auth", () => {
  // Last: these change org A's state (DELETE aims at the spare webhook).
  for (const route of keyed) {
    it(routeKey(route), async () => {
      const keys = route.auth === 'key' ? SCOPES.map((s) => only[s]!) : [only[route.auth]!, ADMIN_KEY];
      for (const key of keys) {
        const answer = await sendAs(route, a.ids, `Bearer ${key}`);
        expect([401, 403], `${routeKey(route)}: ${answer.text.slice(0, 200)}`).not.toContain(answer.status);
        expect(answer.status, `${routeKey(route)}: ${answer.text.slice(0, 200)}`).toBeLessThan(500);
      }
    });
  }
});

describe('the OpenAPI document', () => {
  it('lists every status the routes answered above', async () => {
    const doc = await (await fetch(`${url}/openapi.json`)).json();
    expect(answered.undocumented(doc)).toEqual([]);
  });
});
