import { randomUUID } from 'node:crypto';
import { promises as dns } from 'node:dns';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryActor } from '../../src/actors/delivery-actor.js';
import { WebhookRegistry } from '../../src/services/webhook-registry.js';
import { verifyWebhook } from '../../src/client/index.js';
import { POLICY_V1, policyDigest } from '../../src/domain/policy.js';
import type { LmdbWebhookStore } from '../../src/store/lmdb-webhook-store.js';
import { openLmdb } from '../../src/store/lmdb.js';
import { embedded } from '../support/embedded.js';
import type { Lookup } from '../../src/net/receiver-address.js';
import type { DeliveryRecord, WebhookStore } from '../../src/store/webhook-store.js';
import { quietFor, startReceiver, waitFor, type Receiver, type Received, type Reply } from '../support/receiver.js';
import { call, parseLines, removeDir, runCli, spawnServer, startServer, tempDir, type TestServer } from '../support/server.js';
import { silentLogger } from '../support/logs.js';

/**
 * Receivers here are on loopback; retries 0.2 s apart (one entry, repeated for every retry), so a
 * dead delivery takes about a second.
 */
const FAST = { VIGIL_WEBHOOK_ALLOW_PRIVATE: '1', VIGIL_WEBHOOK_RETRY_SCHEDULE: '0.2' };
/** Retries a second apart: room to act between two attempts. */
const SLOW = { VIGIL_WEBHOOK_ALLOW_PRIVATE: '1', VIGIL_WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1' };
const GATES = ['gate.hold', 'gate.alert', 'gate.collapse'];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let server: TestServer;
let writerKey: string;
let otherOrgKey: string;
const receivers: Receiver[] = [];

beforeAll(async () => {
  server = await startServer(FAST);
  writerKey = (await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'] } })).body.key;
  const cli = await runCli(['keys', 'create', '--org', 'globex', '--scopes', 'events:write,admin'], { VIGIL_DATA_DIR: server.dataDir });
  otherOrgKey = cli.stdout.trim().split('\n').at(-1)!;
});

// Every webhook of the shared server hears every held event of the org: deactivate them between tests.
afterEach(async () => {
  for (const w of (await call(server.url, 'GET', '/webhooks')).body) {
    if (w.active) await call(server.url, 'DELETE', `/webhooks/${w.id}`);
  }
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

afterAll(async () => {
  await server.close();
  removeDir(server.dataDir);
});

async function receiver(reply?: Reply): Promise<Receiver> {
  const r = await startReceiver(reply);
  receivers.push(r);
  return r;
}

let agents = 0;
async function newAgent(url = server.url): Promise<string> {
  const id = `agent-${++agents}`;
  expect((await call(url, 'POST', '/agents/', { body: { agent_id: id, name: id } })).status).toBe(201);
  return id;
}

/** dti 0.99 is severe: a fresh agent goes to hold at once, then alert, then collapse. */
const risky = (agent: string) => ({ agent_id: agent, event_type: 'output_generated', payload: {}, dti: 0.99 });
const clean = (agent: string) => ({ agent_id: agent, event_type: 'output_generated', payload: {} });

async function ingest(body: unknown, url = server.url): Promise<any> {
  const res = await call(url, 'POST', '/events/', { body });
  expect(res.status).toBe(200);
  return res.body;
}

async function createWebhook(body: Record<string, unknown>, url = server.url): Promise<any> {
  const res = await call(url, 'POST', '/webhooks', { body });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

async function deliveries(id: number, query = '', url = server.url): Promise<any[]> {
  const res = await call(url, 'GET', `/webhooks/${id}/deliveries${query}`);
  expect(res.status, res.text).toBe(200);
  return res.body;
}

async function ledgerRow(seq: number, url = server.url): Promise<any> {
  return parseLines((await call(url, 'GET', `/audit/export?since_seq=${seq - 1}&until_seq=${seq}`)).text)[0];
}

/** Checks the signature over the raw bytes and returns the parsed body. */
function verified(request: Received, secret: string): any {
  const parsed = verifyWebhook(request.body, request.headers['x-vigil-signature'] as string, secret);
  expect(parsed).toEqual(JSON.parse(request.body.toString('utf8')));
  return parsed;
}

const header = (request: Received, name: string): string => request.headers[name] as string;

describe('webhook CRUD', () => {
  it('creates a webhook, shows the secret once and only its hint afterwards', async () => {
    const r = await receiver();
    const created = await createWebhook({ url: r.url(), events: ['gate.hold', 'review.released'] });
    const { secret, ...view } = created;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(view).toEqual({
      id: expect.any(Number),
      url: r.url(),
      events: ['gate.hold', 'review.released'],
      format: 'json',
      active: true,
      secret_hint: secret.slice(-8),
      created_at: expect.any(String),
      previous_secret_until: null,
      disabled_reason: null,
    });
    expect(Date.parse(view.created_at)).not.toBeNaN();

    const one = await call(server.url, 'GET', `/webhooks/${view.id}`);
    expect(one.status).toBe(200);
    expect(one.body).toEqual(view);
    expect(one.text).not.toContain(secret);
    const list = await call(server.url, 'GET', '/webhooks');
    expect(list.status).toBe(200);
    expect(list.body).toContainEqual(view);
    expect(list.text).not.toContain(secret);
    expect(list.body.every((w: object) => !('secret' in w))).toBe(true);

    const second = await createWebhook({ url: r.url('/other'), events: ['gate.alert'], format: 'siem_hec' });
    expect(second.id).toBe(view.id + 1);
    expect(second.secret).not.toBe(secret);
  });

  it('answers 400 naming the field for a bad body, and creates nothing', async () => {
    const before = (await call(server.url, 'GET', '/webhooks')).body.length;
    const url = 'http://127.0.0.1:9/hook';
    const cases: [unknown, string][] = [
      [{ events: ['gate.hold'] }, 'url'],
      [{ url: 'ftp://example.com/hook', events: ['gate.hold'] }, 'url'],
      [{ url, events: ['gate.maybe'] }, 'events.0'],
      [{ url, events: ['gate.hold'], format: 'xml' }, 'format'],
      [{ url, events: [] }, 'events'],
      [{ url, events: ['gate.hold', 'gate.hold'] }, 'events'],
      [{ url, events: ['gate.hold'], secret: 'mine' }, 'secret'],
    ];
    for (const [body, path] of cases) {
      const res = await call(server.url, 'POST', '/webhooks', { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.details.map((d: { path: string }) => d.path)).toEqual([path]);
    }
    expect((await call(server.url, 'GET', '/webhooks')).body.length).toBe(before);
  });

  it('answers 401 without a key and 403 for a key without admin', async () => {
    const body = { url: 'http://127.0.0.1:9/hook', events: ['gate.hold'] };
    expect((await call(server.url, 'POST', '/webhooks', { key: null, body })).status).toBe(401);
    expect((await call(server.url, 'GET', '/webhooks', { key: null })).status).toBe(401);
    const forbidden = await call(server.url, 'POST', '/webhooks', { key: writerKey, body });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error.code).toBe('forbidden');
    expect((await call(server.url, 'GET', '/webhooks', { key: writerKey })).status).toBe(403);
  });

  it('hides a webhook from another org (404) and answers 404 for an unknown id', async () => {
    const r = await receiver();
    const { id } = await createWebhook({ url: r.url(), events: ['gate.hold'] });
    for (const [method, path] of [
      ['GET', `/webhooks/${id}`],
      ['GET', `/webhooks/${id}/deliveries`],
      ['POST', `/webhooks/${id}/test`],
      ['DELETE', `/webhooks/${id}`],
    ] as const) {
      const res = await call(server.url, method, path, { key: otherOrgKey });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
    expect((await call(server.url, 'GET', '/webhooks', { key: otherOrgKey })).body).toEqual([]);
    expect((await call(server.url, 'GET', `/webhooks/${id}`)).body.active).toBe(true);
    expect(r.received).toEqual([]);
    for (const path of ['/webhooks/99999', '/webhooks/abc', '/webhooks/0', '/webhooks/99999/deliveries']) {
      expect((await call(server.url, 'GET', path)).status, path).toBe(404);
    }
    expect((await call(server.url, 'DELETE', '/webhooks/99999')).status).toBe(404);

    // Another org's held events make nothing for our webhook.
    expect((await call(server.url, 'POST', '/agents/', { key: otherOrgKey, body: { agent_id: 'g-1', name: 'G' } })).status).toBe(201);
    const foreign = await call(server.url, 'POST', '/events/', { key: otherOrgKey, body: risky('g-1') });
    expect(foreign.body.gate_status).toBe('hold');
    expect(await deliveries(id)).toEqual([]);
  });
});

describe('receiver addresses (SSRF), without VIGIL_WEBHOOK_ALLOW_PRIVATE', () => {
  let guarded: TestServer;
  let rebound = false;
  /** DNS for the test: rebind.test is public until `rebound`, then loopback; other names resolve for real. */
  const lookup: Lookup = async (host) => {
    if (host === 'rebind.test') return [{ address: rebound ? '127.0.0.1' : '93.184.216.34', family: 4 }];
    if (host === 'mixed.test') return [{ address: '93.184.216.34', family: 4 }, { address: '10.1.2.3', family: 4 }];
    if (host === 'nowhere.test') throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return dns.lookup(host, { all: true, verbatim: true });
  };

  beforeAll(async () => {
    guarded = await startServer({ VIGIL_WEBHOOK_RETRY_SCHEDULE: FAST.VIGIL_WEBHOOK_RETRY_SCHEDULE }, tempDir(), undefined, { lookup });
  });
  afterAll(async () => {
    await guarded.close();
    removeDir(guarded.dataDir);
  });

  it('refuses loopback, localhost, metadata and private receivers with 400, creating nothing', async () => {
    const refused = [
      'http://127.0.0.1:1/',
      'http://localhost/',
      'http://169.254.169.254/',
      'http://10.0.0.1/',
      'http://[::1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://2130706433/', // 127.0.0.1 as one number
      'http://mixed.test/', // one public and one private address
    ];
    for (const url of refused) {
      const res = await call(guarded.url, 'POST', '/webhooks', { body: { url, events: ['gate.hold'] } });
      expect(res.status, url).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.details[0].path).toBe('url');
      expect(res.body.error.message).toMatch(/loopback\/private/);
    }
    for (const url of ['http://nowhere.test/', 'http://user:pw@rebind.test/']) {
      const res = await call(guarded.url, 'POST', '/webhooks', { body: { url, events: ['gate.hold'] } });
      expect(res.status, url).toBe(400);
      expect(res.body.error.details[0].path).toBe('url');
    }
    expect((await call(guarded.url, 'GET', '/webhooks')).body).toEqual([]);
  });

  it('refuses at send time a name rebound to loopback after creation: nothing arrives, last_error says why', async () => {
    const r = await receiver();
    const webhook = await createWebhook({ url: `http://rebind.test:${r.port}/hook`, events: GATES }, guarded.url);
    rebound = true;
    const agent = await newAgent(guarded.url);
    const held = await ingest(risky(agent), guarded.url);
    expect(held.gate_status).toBe('hold');
    const [dead] = await waitFor(async () => {
      const list = await deliveries(webhook.id, '', guarded.url);
      return list[0]?.status === 'dead' ? list : null;
    }, 10_000, 'the delivery to die');
    expect(dead).toMatchObject({ event: 'gate.hold', attempts: 6, last_status_code: null, delivered_at: null });
    expect(dead.last_error).toMatch(/refused/);
    expect(dead.last_error).toContain('127.0.0.1');
    const ping = await call(guarded.url, 'POST', `/webhooks/${webhook.id}/test`);
    expect(ping.body).toMatchObject({ delivered: false, status_code: 0, error: expect.stringMatching(/refused/) });
    expect(r.received).toEqual([]);
  });
});

describe('deliveries', () => {
  it('sends one signed json POST per held action, with the documented headers and envelope', async () => {
    const r = await receiver();
    const webhook = await createWebhook({ url: r.url(), events: GATES });
    const agent = await newAgent();
    const actions = [await ingest(risky(agent)), await ingest(risky(agent))];
    expect(actions.map((a) => a.gate_status)).toEqual(['hold', 'alert']);

    const stored = await waitFor(async () => {
      const list = await deliveries(webhook.id);
      return list.length === 2 && list.every((d) => d.status === 'delivered') ? list : null;
    }, 5_000, 'two delivered deliveries');
    expect(stored.map((d) => d.attempts)).toEqual([1, 1]);
    expect(r.received).toHaveLength(2);

    for (const action of actions) {
      const request = r.received.find((q) => JSON.parse(q.body.toString()).data.action_id === action.action_id)!;
      expect(request.method).toBe('POST');
      expect(request.path).toBe('/hook');
      expect(header(request, 'content-type')).toBe('application/json');
      expect(header(request, 'x-vigil-event')).toBe(`gate.${action.gate_status}`);
      const deliveryId = header(request, 'x-vigil-delivery');
      expect(deliveryId).toMatch(UUID);
      const t = Number(/^t=(\d+),v1=[0-9a-f]{64}$/.exec(header(request, 'x-vigil-signature'))?.[1]);
      expect(Math.abs(t - Date.now() / 1000)).toBeLessThan(30);

      const envelope = verified(request, webhook.secret);
      const delivery = stored.find((d) => d.envelope_id === deliveryId)!;
      const row = await ledgerRow(delivery.ledger_seq);
      expect(row).toMatchObject({ kind: 'event', agent_id: agent, body: { action_id: action.action_id } });
      expect(envelope).toStrictEqual({
        id: deliveryId,
        event: `gate.${action.gate_status}`,
        org: 'acme',
        created_at: row.recorded_at,
        data: {
          agent_id: agent,
          action_id: action.action_id,
          event_id: action.event_id,
          gate_status: action.gate_status,
          bii: action.bii,
          reason: action.reason,
          policy_digest: row.body.policy_digest,
          ledger_seq: row.seq,
        },
      });
      expect(delivery).toMatchObject({ event: `gate.${action.gate_status}`, last_status_code: 200, last_error: null, next_attempt_at: delivery.delivered_at });
      expect(Date.parse(delivery.delivered_at)).not.toBeNaN();
    }
    // Signatures cover the exact bytes: a byte changed breaks them.
    const tampered = Buffer.from(r.received[0]!.body);
    const at = tampered.length - 2;
    tampered[at] = tampered[at]! ^ 1;
    expect(() => verifyWebhook(tampered, header(r.received[0]!, 'x-vigil-signature'), webhook.secret)).toThrow();
  });

  it('makes nothing for a pass event or for an event the webhook is not subscribed to', async () => {
    const r = await receiver();
    const webhook = await createWebhook({ url: r.url(), events: ['gate.collapse'] });
    const agent = await newAgent();
    expect((await ingest(clean(agent))).gate_status).toBe('pass');
    // Deliveries are stored before the ingest is answered: an empty list now means none was made.
    expect(await deliveries(webhook.id)).toEqual([]);
    expect((await ingest(risky(agent))).gate_status).toBe('hold');
    expect((await ingest(risky(agent))).gate_status).toBe('alert');
    expect(await deliveries(webhook.id)).toEqual([]);
    let last;
    do last = await ingest(risky(agent));
    while (last.gate_status !== 'collapse');
    const [only, ...rest] = await deliveries(webhook.id);
    expect(rest).toEqual([]);
    expect(only.event).toBe('gate.collapse');
    await waitFor(() => r.received.length === 1, 5_000, 'the collapse delivery');
    expect(header(r.received[0]!, 'x-vigil-event')).toBe('gate.collapse');
    expect(verified(r.received[0]!, webhook.secret).data.action_id).toBe(last.action_id);
  });

  it('formats siem_hec and logs_intake bodies, signed like json', async () => {
    const hec = await receiver();
    const logs = await receiver();
    const hecHook = await createWebhook({ url: hec.url(), events: ['gate.hold'], format: 'siem_hec' });
    const logsHook = await createWebhook({ url: logs.url(), events: ['gate.hold'], format: 'logs_intake' });
    const agent = await newAgent();
    const action = await ingest(risky(agent));
    await waitFor(() => hec.received.length === 1 && logs.received.length === 1, 5_000, 'both deliveries');

    const hecBody = verified(hec.received[0]!, hecHook.secret);
    expect(Object.keys(hecBody).sort()).toEqual(['event', 'sourcetype', 'time']);
    expect(hecBody.sourcetype).toBe('vigil');
    expect(hecBody.event).toMatchObject({ id: header(hec.received[0]!, 'x-vigil-delivery'), event: 'gate.hold', org: 'acme' });
    expect(hecBody.event.data).toMatchObject({ agent_id: agent, action_id: action.action_id, gate_status: 'hold' });
    expect(hecBody.time).toBe(Date.parse(hecBody.event.created_at) / 1000);

    const logsBody = verified(logs.received[0]!, logsHook.secret);
    expect(Array.isArray(logsBody)).toBe(true);
    expect(logsBody).toHaveLength(1);
    const [item] = logsBody;
    expect(item).toMatchObject({ ddsource: 'vigil', service: 'vigil', ddtags: 'event:gate.hold,org:acme' });
    expect(typeof item.message).toBe('string');
    expect(item.message).toContain('gate.hold');
    expect(item.message).toContain(agent);
    expect(item.vigil).toMatchObject({ id: header(logs.received[0]!, 'x-vigil-delivery'), event: 'gate.hold', org: 'acme' });
    expect(item.vigil.data).toMatchObject({ agent_id: agent, action_id: action.action_id });
    for (const r of [hec, logs]) expect(header(r.received[0]!, 'content-type')).toBe('application/json');
  });
});

describe('retries', () => {
  it('retries a failing receiver on a one-entry schedule until dead: exactly six attempts, one delivery id', async () => {
    const r = await receiver(() => 500);
    const webhook = await createWebhook({ url: r.url(), events: GATES });
    const agent = await newAgent();
    await ingest(risky(agent));
    const [dead] = await waitFor(async () => {
      const list = await deliveries(webhook.id);
      return list[0]?.status === 'dead' ? list : null;
    }, 10_000, 'the delivery to die');
    expect(dead).toMatchObject({ attempts: 6, last_status_code: 500, delivered_at: null });
    expect(dead.last_error).toContain('500');
    expect(r.received).toHaveLength(6);
    for (const request of r.received) {
      expect(header(request, 'x-vigil-delivery')).toBe(dead.envelope_id);
      expect(verified(request, webhook.secret).id).toBe(dead.envelope_id);
    }
    expect(new Set(r.received.map((q) => q.body.toString())).size).toBe(1);
  });

  it('delivers once the receiver recovers: 500, 500, 200 is delivered after three attempts', async () => {
    const r = await receiver((_req, n) => (n < 2 ? 500 : 200));
    const webhook = await createWebhook({ url: r.url(), events: GATES });
    await ingest(risky(await newAgent()));
    const [delivered] = await waitFor(async () => {
      const list = await deliveries(webhook.id);
      return list[0]?.status === 'delivered' ? list : null;
    }, 5_000, 'delivery');
    expect(delivered).toMatchObject({ attempts: 3, last_status_code: 200, next_attempt_at: delivered.delivered_at });
    expect(Date.parse(delivered.delivered_at)).not.toBeNaN();
    expect(r.received).toHaveLength(3);
    expect(new Set(r.received.map((q) => header(q, 'x-vigil-delivery')))).toEqual(new Set([delivered.envelope_id]));
  });

  it('counts an attempt without an answer in webhookTimeoutMs as a failure', async () => {
    const timed = await startServer({ ...FAST, VIGIL_WEBHOOK_RETRY_SCHEDULE: '0.1' }, tempDir(), undefined, { webhookTimeoutMs: 300 });
    try {
      const r = await receiver(() => 'hang');
      const webhook = await createWebhook({ url: r.url(), events: GATES }, timed.url);
      await ingest(risky(await newAgent(timed.url)), timed.url);
      const [dead] = await waitFor(async () => {
        const list = await deliveries(webhook.id, '', timed.url);
        return list[0]?.status === 'dead' ? list : null;
      }, 10_000, 'the delivery to die');
      expect(dead).toMatchObject({ attempts: 6, last_status_code: null, last_error: 'timed out after 300 ms' });
      expect(r.received).toHaveLength(6);
    } finally {
      await timed.close();
      removeDir(timed.dataDir);
    }
  });
});

describe('GET /webhooks/{id}/deliveries', () => {
  it('lists newest first, 50 by default, up to 500, and refuses a bad limit', async () => {
    const r = await receiver();
    const webhook = await createWebhook({ url: r.url(), events: GATES });
    const agent = await newAgent();
    for (let i = 0; i < 60; i++) await ingest(risky(agent)); // collapsed from the fourth on: every one is held
    const all = await deliveries(webhook.id, '?limit=500');
    expect(all).toHaveLength(60);
    for (let i = 1; i < all.length; i++) {
      expect(all[i].id).toBeLessThan(all[i - 1].id);
      expect(all[i].ledger_seq).toBeLessThan(all[i - 1].ledger_seq);
    }
    expect(await deliveries(webhook.id)).toHaveLength(50);
    expect((await deliveries(webhook.id)).map((d) => d.id)).toEqual(all.slice(0, 50).map((d) => d.id));
    expect((await deliveries(webhook.id, '?limit=1')).map((d) => d.id)).toEqual([all[0].id]);
    for (const limit of ['0', '501', 'abc', '-1', '']) {
      const res = await call(server.url, 'GET', `/webhooks/${webhook.id}/deliveries?limit=${limit}`);
      expect(res.status, `limit=${limit}`).toBe(400);
      expect(res.body.error.details[0].path).toBe('limit');
    }
    await waitFor(() => r.received.length === 60, 10_000, 'all 60 deliveries');
  });
});

describe('POST /webhooks/{id}/test', () => {
  it('sends a signed ping now, reports the answer, and neither stores nor retries it', async () => {
    const r = await receiver();
    const webhook = await createWebhook({ url: r.url(), events: ['gate.hold'] });
    const ok = await call(server.url, 'POST', `/webhooks/${webhook.id}/test`);
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ delivered: true, status_code: 200, error: null });
    expect(r.received).toHaveLength(1);
    const ping = r.received[0]!;
    expect(header(ping, 'x-vigil-event')).toBe('ping');
    expect(header(ping, 'content-type')).toBe('application/json');
    const envelope = verified(ping, webhook.secret);
    expect(envelope).toMatchObject({ id: header(ping, 'x-vigil-delivery'), event: 'ping', org: 'acme' });
    expect(header(ping, 'x-vigil-delivery')).toMatch(UUID);

    r.reply = () => 503;
    const failed = await call(server.url, 'POST', `/webhooks/${webhook.id}/test`);
    expect(failed.status).toBe(200);
    expect(failed.body).toMatchObject({ delivered: false, status_code: 503 });
    expect(typeof failed.body.error).toBe('string');
    expect(failed.body.error).toContain('503');
    await quietFor(1_000); // five times the retry delay
    expect(r.received).toHaveLength(2);
    expect(await deliveries(webhook.id)).toEqual([]);
  });

  it('reports status_code 0 when no HTTP answer came', async () => {
    const webhook = await createWebhook({ url: 'http://127.0.0.1:1/hook', events: ['gate.hold'] });
    const res = await call(server.url, 'POST', `/webhooks/${webhook.id}/test`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ delivered: false, status_code: 0 });
    expect(res.body.error).toEqual(expect.any(String));
  });
});

describe('DELETE /webhooks/{id}', () => {
  it('deactivates but keeps the record; held events then send nothing; ping is refused', async () => {
    const r = await receiver();
    const webhook = await createWebhook({ url: r.url(), events: GATES });
    const res = await call(server.url, 'DELETE', `/webhooks/${webhook.id}`);
    expect(res.status).toBe(200);
    const { secret, ...view } = webhook;
    expect(res.body).toEqual({ ...view, active: false });
    expect((await call(server.url, 'GET', `/webhooks/${webhook.id}`)).body.active).toBe(false);
    expect((await call(server.url, 'GET', '/webhooks')).body).toContainEqual({ ...view, active: false });
    expect((await call(server.url, 'DELETE', `/webhooks/${webhook.id}`)).body.active).toBe(false);

    await ingest(risky(await newAgent()));
    expect(await deliveries(webhook.id)).toEqual([]);
    expect((await call(server.url, 'POST', `/webhooks/${webhook.id}/test`)).status).toBe(409);
    expect(r.received).toEqual([]);
  });

  it('does not retry an attempt that fails after its webhook was deactivated mid-flight', async () => {
    let answer!: (status: number) => void;
    const held = new Promise<number>((resolve) => (answer = resolve));
    const r = await receiver((_req, n) => (n === 0 ? held : 200));
    const webhook = await createWebhook({ url: r.url(), events: GATES });
    await ingest(risky(await newAgent()));
    await waitFor(() => r.received.length === 1, 5_000, 'the first attempt');
    expect((await call(server.url, 'DELETE', `/webhooks/${webhook.id}`)).status).toBe(200);
    answer(500);
    const [cancelled] = await waitFor(async () => {
      const list = await deliveries(webhook.id);
      return list[0]?.status !== 'queued' ? list : null;
    }, 5_000, 'the attempt to settle');
    expect(cancelled).toMatchObject({ status: 'cancelled', attempts: 1, last_status_code: 500 });
    await quietFor(1_000); // five times the retry delay
    expect(r.received).toHaveLength(1);
  });

  it('cancels a delivery queued for retry: it is never sent again', async () => {
    const slow = await startServer(SLOW);
    try {
      const r = await receiver(() => 500);
      const webhook = await createWebhook({ url: r.url(), events: GATES }, slow.url);
      await ingest(risky(await newAgent(slow.url)), slow.url);
      await waitFor(async () => (await deliveries(webhook.id, '', slow.url))[0]?.attempts === 1, 5_000, 'the first attempt');
      expect((await deliveries(webhook.id, '', slow.url))[0].status).toBe('queued');
      expect((await call(slow.url, 'DELETE', `/webhooks/${webhook.id}`)).status).toBe(200);
      const [cancelled] = await deliveries(webhook.id, '', slow.url);
      expect(cancelled).toMatchObject({ status: 'cancelled', attempts: 1 });
      await quietFor(2_000); // the retry was due a second after the first attempt
      expect(r.received).toHaveLength(1);
      expect((await deliveries(webhook.id, '', slow.url))[0]).toMatchObject({ status: 'cancelled', attempts: 1 });
    } finally {
      await slow.close();
      removeDir(slow.dataDir);
    }
  });
});

describe('restarts', () => {
  it('resumes a delivery queued for retry after a clean restart, with the same delivery id', async () => {
    const dir = tempDir();
    const r = await receiver(() => 500);
    let running = await startServer(SLOW, dir);
    try {
      const webhook = await createWebhook({ url: r.url(), events: GATES }, running.url);
      await ingest(risky(await newAgent(running.url)), running.url);
      const [first] = await waitFor(async () => {
        const list = await deliveries(webhook.id, '', running.url);
        return list[0]?.attempts === 1 ? list : null;
      }, 5_000, 'the first attempt');
      expect(first.status).toBe('queued');
      await running.close();
      expect(r.received).toHaveLength(1);

      r.reply = () => 200;
      running = await startServer(SLOW, dir);
      const [done, ...rest] = await waitFor(async () => {
        const list = await deliveries(webhook.id, '', running.url);
        return list[0]?.status === 'delivered' ? list : null;
      }, 5_000, 'delivery after the restart');
      expect(rest).toEqual([]);
      expect(done).toMatchObject({ id: first.id, envelope_id: first.envelope_id, attempts: 2, last_status_code: 200 });
      expect(r.received).toHaveLength(2);
      for (const request of r.received) {
        expect(header(request, 'x-vigil-delivery')).toBe(first.envelope_id);
        verified(request, webhook.secret);
      }
    } finally {
      await running.close();
      removeDir(dir);
    }
  });

  it('after kill -9 sends what was acknowledged, and again what was in flight, with the same delivery ids', async () => {
    const dir = tempDir();
    const r = await receiver(() => 'hang');
    let child = await spawnServer(dir, SLOW);
    try {
      const agent = await newAgent(child.url);
      const before = await ingest(risky(agent), child.url); // before the webhook: never delivered, even on replay
      const webhook = await createWebhook({ url: r.url(), events: GATES }, child.url);
      // The receiver holds the first attempt open: the process dies before it learns the outcome.
      const inFlight = await ingest(risky(agent), child.url);
      await waitFor(() => r.received.length === 1, 5_000, 'the first attempt');
      // Killed right after the 200: the delivery must already be durable.
      const acknowledged = await ingest(risky(agent), child.url);
      child.child.kill('SIGKILL');
      await child.exited;

      r.reply = () => 200;
      child = await spawnServer(dir, SLOW);
      const done = await waitFor(async () => {
        const list = await deliveries(webhook.id, '', child.url);
        return list.length >= 2 && list.every((d) => d.status === 'delivered') ? list : null;
      }, 10_000, 'both deliveries after the restart');
      expect(done).toHaveLength(2); // none for the record before the webhook, none made twice
      const byAction = new Map<number, Set<string>>();
      for (const request of r.received) {
        const envelope = verified(request, webhook.secret);
        expect(header(request, 'x-vigil-delivery')).toBe(envelope.id);
        byAction.set(envelope.data.action_id, (byAction.get(envelope.data.action_id) ?? new Set()).add(envelope.id));
      }
      expect([...byAction.keys()].sort()).toEqual([inFlight.action_id, acknowledged.action_id].sort());
      expect(byAction.has(before.action_id)).toBe(false);
      expect(done.map((d) => d.attempts)).toEqual([1, 1]); // the attempts cut short were never recorded
      // One envelope id per delivery, on every request for it.
      expect(new Set(done.map((d) => d.envelope_id))).toEqual(new Set([...byAction.values()].flatMap((ids) => [...ids])));
      expect([...byAction.values()].every((ids) => ids.size === 1)).toBe(true);
      expect(r.received.filter((q) => verified(q, webhook.secret).data.action_id === inFlight.action_id)).toHaveLength(2);
    } finally {
      child.child.kill('SIGTERM');
      await child.exited;
      removeDir(dir);
    }
  });
});

/** The webhook store with chosen delivery writes refused before they reach LMDB, as a failing disk would. */
function failingWrites(inner: LmdbWebhookStore, fails: (records: readonly DeliveryRecord[]) => boolean): WebhookStore {
  return {
    listAllWebhooks: () => inner.listAllWebhooks(),
    putWebhook: (w) => inner.putWebhook(w),
    putDeliveries: (records, cursors) =>
      fails(records) ? Promise.reject(new Error('EIO: disk on fire')) : inner.putDeliveries(records, cursors),
    getDelivery: (org, webhookId, id) => inner.getDelivery(org, webhookId, id),
    listDeliveries: (org, id, limit) => inner.listDeliveries(org, id, limit),
    queuedDeliveries: () => inner.queuedDeliveries(),
    countDeliveries: (org, month) => inner.countDeliveries(org, month),
    lastDeliveryId: () => inner.lastDeliveryId(),
    deliveryCursors: () => inner.deliveryCursors(),
  };
}

/**
 * The embedded delivery path wired as runtime.ts wires it (real LMDB, its ledger log, the local router, org writer, HTTP
 * to a loopback receiver), except that the delivery actor writes through `failingWrites`.
 */
async function deliveryPath(dir: string, fails: (records: readonly DeliveryRecord[]) => boolean) {
  const digest = policyDigest(POLICY_V1);
  // Deliveries are stored before the writer answers, as runtime.ts wires it.
  const path = embedded(dir, { policy: POLICY_V1, policyDigest: digest, maxPending: 1_000, afterAppend: (org, rows) => deliveryActor.onCommitted(org, rows) });
  const store = path.stores;
  const bus = path.commands;
  path.actors.finishReplay();
  const webhookStore = failingWrites(store.webhooks, fails);
  const webhooks = new WebhookRegistry(webhookStore, {
    checkUrl: () => Promise.resolve(null),
    ledgerLength: (org) => store.ledger.last(org)?.seq ?? 0,
    maxActive: () => ({ plan: 'test', limit: null }),
    now: Date.now,
  });
  const deliveryActor = new DeliveryActor(webhookStore, webhooks, {
    schedule: [0.1],
    disableDays: 5,
    allowPrivate: true,
    timeoutMs: 2_000,
    bounds: { total: 4, perOrg: 4, perWebhook: 2, slow: 1, slowPerOrg: 1 },
    policyDigest: digest,
    now: Date.now,
    newId: randomUUID,
    log: silentLogger(),
    storeRetry: { firstMs: 50, maxMs: 200 },
  });
  // A start replays the ledger after the delivery cursor (start-up.ts does the same).
  const replay = await path.ledger.subscribe(({ org, rows }) => void deliveryActor.onCommitted(org, rows), path.ledger.positionAfter(deliveryActor.cursors()));
  replay.unsubscribe();
  deliveryActor.start();
  const org = 'o';
  return {
    store,
    webhooks,
    deliveries: deliveryActor,
    /** The stored cursor, read from LMDB (not the actor's memory). */
    storedCursor: () => store.webhooks.deliveryCursors().get(org) ?? 0,
    stored: (webhookId: number) => store.webhooks.listDeliveries(org, webhookId, 100),
    register: (agent: string) =>
      bus.request({ type: 'agent.register', org, agent: { agent_id: agent, name: agent, kind: 'production', observed: true } }),
    /** A held event; resolves with its ledger seq once the writer answered ok (what a 200 stands for). */
    ingestHeld: async (agent: string): Promise<number> => {
      const reply = await bus.request({
        type: 'event.ingest',
        org,
        event: { agent_id: agent, event_type: 'output_generated', payload: {}, dti: 0.99, source: 'self', actor: null },
      });
      expect(reply.ok).toBe(true);
      return store.ledger.last(org)!.seq;
    },
    close: async () => {
      await deliveryActor.close();
      await path.close();
    },
  };
}

describe('delivery writes that fail', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach(removeDir));
  const newDir = (): string => {
    const dir = tempDir();
    dirs.push(dir);
    return dir;
  };

  it('answers ok, keeps the cursor behind the unstored delivery even when a later write and a checkpoint run, then stores and sends it without a restart', async () => {
    const r = await receiver();
    let broken = true;
    const path = await deliveryPath(newDir(), () => broken);
    try {
      const webhook = await path.webhooks.create('o', { url: r.url(), events: ['gate.hold', 'gate.alert'], format: 'json' });
      await path.register('a');
      const first = await path.ingestHeld('a');
      const second = await path.ingestHeld('a');
      await path.deliveries.saveCursors(); // a checkpoint while the writes fail
      expect(path.storedCursor()).toBeLessThan(first);
      expect(path.stored(webhook.id)).toEqual([]);
      expect(r.received).toEqual([]);

      broken = false; // the disk recovers: the held deliveries are rewritten by the actor itself
      const sent = await waitFor(() => (r.received.length === 2 ? r.received : null), 5_000, 'both deliveries to be sent');
      const stored = await waitFor(() => {
        const list = path.stored(webhook.id);
        return list.length === 2 && list.every((d) => d.status === 'delivered') ? list : null;
      }, 5_000, 'both deliveries to be stored as delivered');
      expect(stored.map((d) => d.ledger_seq).sort()).toEqual([first, second]);
      expect(new Set(sent.map((q) => header(q, 'x-vigil-delivery')))).toEqual(new Set(stored.map((d) => d.envelope_id)));
      expect(path.storedCursor()).toBe(second);
    } finally {
      await path.close();
    }
  });

  it('makes the unstored deliveries after a restart, once each: the stored cursor never passed them', async () => {
    const dir = newDir();
    const r = await receiver();
    // Only writes carrying the first event's delivery (the hold) fail: the second event's write
    // must not carry the cursor past the first.
    let path = await deliveryPath(dir, (records) => records.some((d) => d.event === 'gate.hold'));
    let webhookId: number;
    let seqs: number[];
    try {
      webhookId = (await path.webhooks.create('o', { url: r.url(), events: ['gate.hold', 'gate.alert'], format: 'json' })).id;
      await path.register('a');
      seqs = [await path.ingestHeld('a'), await path.ingestHeld('a')];
    } finally {
      await path.close(); // saves cursors on the way out; that write fails too
    }
    expect(r.received).toEqual([]);
    const reopened = openLmdb(dir);
    const cursor = reopened.webhooks.deliveryCursors().get('o') ?? 0;
    await reopened.close();
    expect(cursor).toBeLessThan(seqs[0]!);

    path = await deliveryPath(dir, () => false);
    try {
      const stored = await waitFor(() => {
        const list = path.stored(webhookId);
        return list.length === 2 && list.every((d) => d.status === 'delivered') ? list : null;
      }, 5_000, 'both deliveries after the restart');
      expect(stored.map((d) => d.ledger_seq).sort()).toEqual(seqs);
      expect(r.received).toHaveLength(2);
      expect(new Set(r.received.map((q) => header(q, 'x-vigil-delivery')))).toEqual(new Set(stored.map((d) => d.envelope_id)));
      await path.deliveries.saveCursors();
      expect(path.storedCursor()).toBe(seqs[1]);
    } finally {
      await path.close();
    }
  });

  it('keeps a delivery scheduled when the write of a failed attempt fails: it is retried and delivered without a restart', async () => {
    const r = await receiver((_req, n) => (n === 0 ? 500 : 200));
    let refusals = 2;
    const path = await deliveryPath(newDir(), (records) => records.some((d) => d.attempts === 1 && d.status === 'queued') && refusals-- > 0);
    try {
      const webhook = await path.webhooks.create('o', { url: r.url(), events: ['gate.hold'], format: 'json' });
      await path.register('a');
      await path.ingestHeld('a');
      const [done] = await waitFor(() => {
        const list = path.stored(webhook.id);
        return list[0]?.status === 'delivered' ? list : null;
      }, 5_000, 'the delivery to be retried and delivered');
      expect(refusals).toBeLessThan(0); // both refused writes happened
      expect(done).toMatchObject({ attempts: 2, last_status: 200 });
      expect(r.received).toHaveLength(2);
      expect(new Set(r.received.map((q) => header(q, 'x-vigil-delivery')))).toEqual(new Set([done!.envelope_id]));
    } finally {
      await path.close();
    }
  });
});
