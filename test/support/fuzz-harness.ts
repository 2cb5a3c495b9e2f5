import type { Route } from '../../src/http/router.js';
import { errorBodyProblem, isDocumented503 } from './answer-rules.js';
import { headSeq, METRICS_TOKEN, seedOrg, settingUp, startTargetServer } from './org-fixture.js';
import type { Receiver } from './receiver.js';
import { caseOf, routeKey, type OrgIds } from './route-table.js';
import { describeRequest, send, type Answer, type Outgoing } from './send.js';
import { ADMIN_KEY, call, ORG, runCli, type TestServer } from './server.js';

/**
 * The fuzz suite's target: the real service (demo mode on, so every route is mounted) with a
 * seeded org, a key per scope, and `exercise`, which sends one request and checks what must hold
 * for every answer.
 */
export interface FuzzTarget {
  server: TestServer;
  receiver: Receiver;
  ids: OrgIds;
  keys: { 'events:write': string; review: string; admin: string };
  sandboxKey: string;
  fresh: () => string;
  /** Status counts per route, printed at the end (to see what the generators reach). */
  stats: Map<string, Map<number, number>>;
  close: () => Promise<void>;
}

/**
 * Errors thrown and never caught while the in-process server ran. A real process would have died
 * of them; in a test worker they would only be reported at the end, detached from their request.
 */
const uncaught: string[] = [];
const record = (error: unknown): void => {
  uncaught.push(error instanceof Error ? (error.stack ?? error.message) : String(error));
};

export async function startFuzzTarget(): Promise<FuzzTarget> {
  process.on('uncaughtException', record);
  process.on('unhandledRejection', record);
  const { server, receiver, close } = await startTargetServer();
  return settingUp(
    async () => {
      process.off('uncaughtException', record);
      process.off('unhandledRejection', record);
      await close();
    },
    () => prepare(server, receiver, close),
  );
}

async function prepare(server: TestServer, receiver: Receiver, close: () => Promise<void>): Promise<FuzzTarget> {
  const plan = await runCli(['orgs', 'set-plan', '--org', ORG, '--plan', 'scale'], { VIGIL_DATA_DIR: server.dataDir });
  if (plan.code !== 0) throw new Error(`orgs set-plan failed: ${plan.stderr}`);
  const { ids } = await seedOrg(server.url, ADMIN_KEY, ORG, receiver.port);
  const key = async (scope: string): Promise<string> => (await call(server.url, 'POST', '/admin/keys', { body: { scopes: [scope] } })).body.key;
  const keys = { 'events:write': await key('events:write'), review: await key('review'), admin: await key('admin') };
  const sandbox = await call(server.url, 'POST', '/api/v1/keys', { key: null, body: { email: 'fuzz@example.test' } });
  let n = 0;
  return {
    server,
    receiver,
    ids,
    keys,
    sandboxKey: sandbox.body.key,
    fresh: () => `${process.pid}-${++n}`,
    stats: new Map(),
    async close() {
      process.off('uncaughtException', record);
      process.off('unhandledRejection', record);
      await close();
    },
  };
}

/** The key a route is called with: the one its auth needs (a single-scope key), or none. */
export function keyFor(target: FuzzTarget, route: Route, anyKey: 'events:write' | 'review' | 'admin' = 'review'): string | null {
  if (route.auth === 'none') {
    const own = caseOf(route).ownKey;
    return own === 'sandbox' ? target.sandboxKey : own === 'metrics' ? METRICS_TOKEN : null;
  }
  // No route is mounted with auth audit:read (audit routes are `key` routes marked `audit`).
  return target.keys[route.auth === 'key' ? anyKey : (route.auth as 'events:write' | 'review' | 'admin')];
}

interface Fingerprint {
  head: number;
  webhooks: string;
  studio: string;
}

async function fingerprint(target: FuzzTarget): Promise<Fingerprint> {
  const { url } = target.server;
  const [head, webhooks, studio] = await Promise.all([
    headSeq(url, ADMIN_KEY),
    call(url, 'GET', '/webhooks').then((r) => r.text),
    call(url, 'GET', '/studio/agents').then((r) => r.text),
  ]);
  return { head, webhooks, studio };
}

let baseline: Fingerprint | null = null;

/** After requests sent outside `exercise` and `survives`, which may have changed state. */
export function forgetState(): void {
  baseline = null;
}

/**
 * Whether a webhook body is safe to send: a receiver URL with an IP literal other than loopback
 * (`http://1.1/` is 1.0.0.1) would make the server connect past this machine.
 */
export function loopbackOnly(route: Route, body: Outgoing['body']): boolean {
  // Every route that creates a receiver: POST /webhooks and its trailing-slash twin.
  const createsReceiver = route.method === 'post' && route.path.replace(/\/$/, '') === '/webhooks';
  if (!createsReceiver || body === undefined) return true;
  let url: unknown;
  try {
    url = JSON.parse(typeof body === 'string' ? body : Buffer.from(body).toString('utf8'))?.url;
  } catch {
    return true;
  }
  if (typeof url !== 'string' || !URL.canParse(url)) return true;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  const literal = /^[\d.]+$/.test(host) || host.includes(':');
  return !literal || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Sends one request and checks what holds for every answer: no 5xx but a documented 503 (which,
 * as "retry" promises, must not repeat on a healthy disk), the process still answers /health, a 4xx
 * is the JSON error body and changed no state (ledger head, webhooks, studio agents), nothing
 * polluted Object.prototype (the server runs in this process), and the case's own expectation.
 */
export async function exercise(
  target: FuzzTarget,
  route: Route,
  req: Outgoing,
  label: string,
  expect?: (a: Answer) => string | null,
  /** How the request goes out: fetch by default; a raw socket for framing cases. */
  transport: () => Promise<Answer> = () => send(target.server.url, req),
): Promise<Answer> {
  const before = baseline ?? (await fingerprint(target));
  baseline = null; // stale until this case ends well
  let answer: Answer;
  try {
    answer = await transport();
    if (isDocumented503(answer)) answer = await transport();
  } catch (error) {
    const thrown = uncaught.length === 0 ? '' : `\n  - the server threw and nothing caught it: ${uncaught.splice(0).join('\n')}`;
    throw new Error(`${label}\n  - ${String(error)}${thrown}`);
  }
  count(target, route, answer.status);
  const problems: string[] = [];
  if (answer.status >= 500) problems.push(isDocumented503(answer) ? 'a 503 again on retry: "retry" never succeeds' : `a ${answer.status}`);
  const health = await send(target.server.url, { method: 'GET', path: '/health' }).catch((e: unknown) => ({ status: 0, text: String(e) }));
  if (health.status !== 200) problems.push(`the server no longer answers GET /health (${health.status} ${health.text.slice(0, 100)})`);
  const after = await fingerprint(target);
  if (after.head < before.head) problems.push(`the ledger head went back from seq ${before.head} to ${after.head}`);
  if (answer.status >= 400) {
    const shape = answer.status < 500 ? errorBodyProblem(answer, { htmlNotFound: caseOf(route).htmlNotFound }) : null;
    if (shape !== null) problems.push(shape);
    if (after.head !== before.head) problems.push(`a ${answer.status} moved the ledger head from seq ${before.head} to ${after.head}`);
    if (after.webhooks !== before.webhooks) problems.push(`a ${answer.status} changed the webhooks`);
    if (after.studio !== before.studio) problems.push(`a ${answer.status} changed the studio agents`);
  }
  const own = expect?.(answer) ?? null;
  if (own !== null) problems.push(own);
  if (uncaught.length > 0) problems.push(`the server threw and nothing caught it (a process would have died): ${uncaught.splice(0).join('\n')}`);
  const proto = Object.prototype as Record<string, unknown>;
  if (proto.polluted !== undefined || proto.isAdmin !== undefined) problems.push('Object.prototype was polluted');
  if (problems.length > 0) {
    throw new Error(`${label}\n  request: ${describeRequest(req)}\n  answer: ${answer.status} ${answer.text.slice(0, 300)}\n  - ${problems.join('\n  - ')}`);
  }
  baseline = after;
  return answer;
}

/**
 * For requests that may get no answer at all (broken framing): afterwards the server still answers
 * /health, nothing was recorded or changed, nothing was thrown uncaught, and an answer, if one
 * came, was not a 5xx and (if an error) the JSON error body.
 */
export async function survives(target: FuzzTarget, label: string, act: () => Promise<Answer[]>): Promise<void> {
  const before = baseline ?? (await fingerprint(target));
  baseline = null;
  const answers = await act();
  const problems: string[] = [];
  for (const answer of answers) {
    if (answer.status >= 500 && !isDocumented503(answer)) problems.push(`a ${answer.status}: ${answer.text.slice(0, 200)}`);
    const shape = answer.status >= 400 ? errorBodyProblem(answer) : null;
    if (shape !== null) problems.push(shape);
  }
  const health = await send(target.server.url, { method: 'GET', path: '/health' }).catch((e: unknown) => ({ status: 0, text: String(e) }));
  if (health.status !== 200) problems.push(`the server no longer answers GET /health (${health.status} ${health.text.slice(0, 100)})`);
  const after = await fingerprint(target);
  if (JSON.stringify(after) !== JSON.stringify(before)) problems.push(`state changed: ${JSON.stringify(before).slice(0, 100)} → ${JSON.stringify(after).slice(0, 100)}`);
  if (uncaught.length > 0) problems.push(`the server threw and nothing caught it: ${uncaught.splice(0).join('\n')}`);
  if (problems.length > 0) throw new Error(`${label}\n  answers: ${answers.map((a) => `${a.status} ${a.text.slice(0, 120)}`).join(' | ') || 'none'}\n  - ${problems.join('\n  - ')}`);
  baseline = after;
}

function count(target: FuzzTarget, route: Route, status: number): void {
  const key = routeKey(route);
  const byStatus = target.stats.get(key) ?? new Map<number, number>();
  byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  target.stats.set(key, byStatus);
}

/** One line per route: how often each status came back. */
export function statsTable(target: FuzzTarget): string {
  const total = [...target.stats.values()].reduce((sum, byStatus) => sum + [...byStatus.values()].reduce((a, b) => a + b, 0), 0);
  return `${total} fuzz requests\n` + [...target.stats]
    .map(([route, byStatus]) => `${route.padEnd(42)} ${[...byStatus].sort(([a], [b]) => a - b).map(([s, n]) => `${s}×${n}`).join(' ')}`)
    .join('\n');
}
