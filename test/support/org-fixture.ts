import type { Lookup } from '../../src/net/receiver-address.js';
import { startReceiver, waitFor, type Receiver } from './receiver.js';
import type { OrgIds } from './route-table.js';
import { call, removeDir, startServer, type TestServer } from './server.js';

/**
 * An org with one of every resource the routes name, for the hostile-input suites. Needs a server
 * in demo mode (studio agents) with VIGIL_WEBHOOK_ALLOW_PRIVATE=1 and RECEIVER_LOOKUP (the webhook
 * receiver is on loopback).
 */

/** The one host name webhooks may use: resolved to loopback by RECEIVER_LOOKUP, never by DNS. */
export const RECEIVER_HOST = 'receiver.test';

/** Resolves RECEIVER_HOST to 127.0.0.1 and nothing else: no receiver URL can reach past loopback or ask DNS. */
export const RECEIVER_LOOKUP: Lookup = async (hostname) => {
  if (hostname === RECEIVER_HOST) return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

/** The receiver answers 500 to a path ending so. */
const FAILING_PATH = '-failing';

/** The metrics token of the target server (GET /metrics). */
export const METRICS_TOKEN = 'fuzz-metrics-token-0123456789';

/**
 * The real service as the hostile-input suites need it: demo mode (every route mounted), a
 * loopback webhook receiver, public reads not rate limited (the limit has its own tests).
 * `close` may be called more than once.
 */
export async function startTargetServer(): Promise<{ server: TestServer; receiver: Receiver; close: () => Promise<void> }> {
  // A path ending in FAILING_PATH gets a 500 (a receiver that is down), any other a 200.
  const receiver = await startReceiver((request) => (request.path.endsWith(FAILING_PATH) ? 500 : 200));
  const server = await startServer(
    {
      VIGIL_DEMO: '1',
      // GET /metrics mounted (the route table knows it).
      VIGIL_METRICS_TOKEN: METRICS_TOKEN,
      // Receivers resolve through RECEIVER_LOOKUP only (receiver.test → 127.0.0.1), and the fuzz
      // sends no IP literal but loopback: no delivery leaves the machine.
      VIGIL_WEBHOOK_ALLOW_PRIVATE: '1',
      // A failing delivery is dead at once (six attempts without a wait): the retry route needs one.
      VIGIL_WEBHOOK_RETRY_SCHEDULE: '0',
      VIGIL_PUBLIC_RATE_LIMIT: '1000000',
      // Durability is not what these suites test; `process` keeps their many accepted writes quick.
      VIGIL_DURABILITY: 'process',
    },
    undefined,
    undefined,
    { lookup: RECEIVER_LOOKUP, webhookTimeoutMs: 2_000 },
  );
  let closing: Promise<void> | null = null;
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      await server.close();
      await receiver.close();
      removeDir(server.dataDir);
    })());
  return { server, receiver, close };
}

/** Runs a suite's setup; if it fails, closes the server first (a failed setup leaves nothing behind). */
export async function settingUp<T>(close: () => Promise<void>, setUp: () => Promise<T>): Promise<T> {
  try {
    return await setUp();
  } catch (error) {
    await close();
    throw error;
  }
}

export interface SeededOrg {
  ids: OrgIds;
  /** Text that only this org's private data holds: another org must never read it. */
  secrets: string[];
}

async function ok(res: Promise<{ status: number; body: any; text: string }>, status: number, what: string): Promise<any> {
  const answer = await res;
  if (answer.status !== status) throw new Error(`seeding: ${what} answered ${answer.status}, expected ${status}: ${answer.text.slice(0, 300)}`);
  return answer.body;
}

/** Seeds an org through its admin key (every scope); `receiverPort` is a loopback receiver's. */
export async function seedOrg(url: string, key: string, org: string, receiverPort: number): Promise<SeededOrg> {
  const secrets = [`${org}-secret-name`, `${org}-secret-payload`, `${org}-secret-hook`, `${org}-secret-persona`];
  const [name, payload, hook, persona] = secrets as [string, string, string, string];
  const post = (path: string, body: unknown) => call(url, 'POST', path, { key, body });
  const agent = `${org}-agent`;
  const publicAgent = `${org}-public`;
  await ok(post('/agents/', { agent_id: agent, name }), 201, 'register agent');
  await ok(post('/agents/', { agent_id: publicAgent, name: `${org} public agent` }), 201, 'register public agent');
  await ok(call(url, 'PATCH', `/admin/agents/${publicAgent}`, { key, body: { public: true } }), 200, 'make agent public');
  await ok(post('/events/', { agent_id: agent, event_type: 'output_generated', payload: { memo: payload } }), 200, 'clean event');
  // dti 0.99 is severe: a fresh agent's gate holds at once.
  const risky = await ok(post('/events/', { agent_id: agent, event_type: 'output_generated', payload: {}, dti: 0.99 }), 200, 'risky event');
  if (risky.requires_human_review !== true) throw new Error(`seeding: the risky event was not held: ${JSON.stringify(risky)}`);
  const hookUrl = `http://${RECEIVER_HOST}:${receiverPort}/${hook}`;
  const webhook = await ok(post('/webhooks', { url: hookUrl, events: ['review.escalated'] }), 200, 'create webhook');
  const spare = await ok(post('/webhooks', { url: hookUrl, events: ['review.escalated'] }), 200, 'create a second webhook');
  const failing = await ok(post('/webhooks', { url: `${hookUrl}${FAILING_PATH}`, events: ['review.escalated'] }), 200, 'create a failing webhook');
  // Escalating leaves the action held, and makes a delivery for each webhook: the failing one's dies.
  await ok(post(`/reviews/${risky.action_id}`, { outcome: 'escalated' }), 200, 'escalate the held action');
  const dead = await waitFor(async () => {
    const list = await ok(call(url, 'GET', `/webhooks/${failing.id}/deliveries`, { key }), 200, 'list the failing webhook\'s deliveries');
    return (list as { id: number; status: string }[]).find((d) => d.status === 'dead');
  }, 10_000, 'a dead delivery');
  const spareKey = await ok(post('/admin/keys', { scopes: ['review'], name: `${org} spare` }), 201, 'create a spare key');
  const studio = await ok(post('/studio/agents', { name: `${org} studio`, domain: 'clinical', persona }), 201, 'create studio agent');
  const chat = await ok(post('/studio/agents', { name: `${org} chat`, domain: 'wellness', persona }), 201, 'create chat agent');
  await ok(post(`/studio/agents/${chat.agent_id}/deploy`, undefined), 200, 'deploy chat agent');
  let ledgerLength = await headSeq(url, key);
  const bundle = await ok(post('/exports/bundle', { since_seq: 0, until_seq: ledgerLength }), 200, 'export bundle');
  ledgerLength = await headSeq(url, key);
  // Only this org's reads show its bundle's digest and its records' content hashes.
  if (typeof bundle.export?.manifest_sha256 !== 'string') throw new Error(`seeding: no manifest digest in ${JSON.stringify(bundle.export)}`);
  secrets.push(bundle.export.manifest_sha256);
  const rows = (await call(url, 'GET', '/audit/export', { key })).text.split('\n').filter((line) => line !== '');
  secrets.push(...rows.map((line) => JSON.parse(line).content_hash as string));
  const ids: OrgIds = {
    org,
    agent,
    publicAgent,
    heldAction: risky.action_id,
    webhook: webhook.id,
    spareWebhook: spare.id,
    failingWebhook: failing.id,
    deadDelivery: dead.id,
    spareKey: spareKey.id,
    studioAgent: studio.agent_id,
    chatAgent: chat.agent_id,
    ledgerLength,
    hookUrl,
  };
  return { ids, secrets };
}

/** The org's last ledger seq (the cheapest observable of the ledger: one header, no rows). */
export async function headSeq(url: string, key: string): Promise<number> {
  const res = await fetch(`${url}/audit/export?since_seq=999999999999999`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  const seq = res.headers.get('x-vigil-ledger-head-seq');
  if (res.status !== 200 || seq === null) throw new Error(`cannot read the ledger head: ${res.status}`);
  return Number(seq);
}

/**
 * Everything an org's key can read about the org's state, as text: two snapshots are equal when
 * nothing changed. (Reading the studio list seeds an org's studio on first use, so read it once
 * before taking the first snapshot.)
 */
export async function orgSnapshot(url: string, key: string, ids: OrgIds): Promise<Record<string, string>> {
  const month = new Date().toISOString().slice(0, 7);
  const paths = [
    '/audit/export',
    '/webhooks',
    `/webhooks/${ids.webhook}/deliveries`,
    '/studio/agents',
    '/reviews?status=pending',
    '/reviews?status=decided',
    '/exports',
    `/agents/${ids.agent}`,
    `/agents/${ids.publicAgent}`,
    `/billing/statement?month=${month}`,
    '/billing/plan',
  ];
  const snapshot: Record<string, string> = {};
  for (const path of paths) {
    const res = await call(url, 'GET', path, { key });
    snapshot[path] = `${res.status} ${res.text}`;
  }
  return snapshot;
}
