import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { quietFor, startReceiver, waitFor, type Receiver, type Received, type Reply } from '../support/receiver.js';
import { call, removeDir, runCli, startServer, type TestServer } from '../support/server.js';

/**
 * DESIGN §11's webhook operations over real HTTP: Standard Webhooks headers checked by the
 * `standardwebhooks` package and X-Vigil-Signature by Stripe's SDK (both outside libraries), secret
 * rotation, the retry of a dead delivery, 410 Gone, auto-disable after failing too long, and
 * Retry-After.
 */

/** Retries 0.1 s apart, the fifth 1.5 s after (dead in 1.9 s); a receiver's Retry-After is held within 0.1 s and 1.5 s. */
const ENV = { VIGIL_WEBHOOK_ALLOW_PRIVATE: '1', VIGIL_WEBHOOK_RETRY_SCHEDULE: '0.1,0.1,0.1,0.1,1.5' };
/** The same, and a webhook failing every attempt for 0.00002 days (1.728 s) is deactivated. */
const QUICK_DISABLE = { ...ENV, VIGIL_WEBHOOK_DISABLE_DAYS: '0.00002' };
const GATES = ['gate.hold', 'gate.alert', 'gate.collapse'];
const STANDARD_SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

let server: TestServer;
const logs: { msg: string; fields?: Record<string, unknown> }[] = [];
let otherOrgKey: string;
const receivers: Receiver[] = [];
const stripe = new Stripe('sk_test_unused');

beforeAll(async () => {
  server = await startServer(ENV, undefined, logs);
  const cli = await runCli(['keys', 'create', '--org', 'globex', '--scopes', 'admin'], { VIGIL_DATA_DIR: server.dataDir });
  otherOrgKey = cli.stdout.trim().split('\n').at(-1)!;
});

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

async function createWebhook(url: string, events = GATES, base = server.url): Promise<any> {
  const res = await call(base, 'POST', '/webhooks', { body: { url, events } });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

let agents = 0;
/** A fresh agent and one severe event: its gate holds at once, so every gate webhook gets one delivery. */
async function holdOne(base = server.url): Promise<void> {
  const id = `ops-agent-${++agents}`;
  expect((await call(base, 'POST', '/agents/', { body: { agent_id: id, name: id } })).status).toBe(201);
  const res = await call(base, 'POST', '/events/', { body: { agent_id: id, event_type: 'output_generated', payload: {}, dti: 0.99 } });
  expect(res.body.gate_status).toBe('hold');
}

async function deliveries(id: number, base = server.url): Promise<any[]> {
  const res = await call(base, 'GET', `/webhooks/${id}/deliveries`);
  expect(res.status, res.text).toBe(200);
  return res.body;
}

const waitStatus = (webhook: number, status: string, what: string, base = server.url): Promise<any> =>
  waitFor(async () => (await deliveries(webhook, base)).find((d) => d.status === status), 10_000, what);

const headers = (request: Received): Record<string, string> => request.headers as Record<string, string>;

/** Both outside libraries accept the request with `secret`; each returns the parsed body. */
function verifiedByBoth(request: Received, secret: string): unknown {
  const body = request.body.toString('utf8');
  const standard = new StandardWebhook(secret).verify(body, headers(request));
  const event = stripe.webhooks.constructEvent(request.body, headers(request)['x-vigil-signature']!, secret);
  expect(event).toEqual(standard);
  return standard;
}

describe('Standard Webhooks and Stripe signatures', () => {
  it('gives new webhooks a standard base64 secret, and signs every attempt so that both libraries verify it', async () => {
    const r = await receiver((_, n) => (n === 0 ? 500 : 200));
    const webhook = await createWebhook(r.url());
    expect(webhook.secret).toMatch(STANDARD_SECRET);
    expect(Buffer.from(webhook.secret.slice(6), 'base64')).toHaveLength(32);
    await holdOne();
    await waitStatus(webhook.id, 'delivered', 'a delivery after one retry');
    expect(r.received).toHaveLength(2);
    for (const request of r.received) {
      const h = headers(request);
      // webhook-id is the delivery id receivers already see, the same on every attempt.
      expect(h['webhook-id']).toBe(h['x-vigil-delivery']);
      expect(h['webhook-timestamp']).toBe(/^t=(\d+),/.exec(h['x-vigil-signature']!)?.[1]);
      expect(h['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(verifiedByBoth(request, webhook.secret)).toMatchObject({ id: h['webhook-id'], event: 'gate.hold', org: 'acme' });
    }
    expect(r.received[0]!.headers['webhook-id']).toBe(r.received[1]!.headers['webhook-id']);

    // A byte changed, or another secret: both refuse.
    const tampered: Received = { ...r.received[0]!, body: Buffer.from(r.received[0]!.body.toString().replace('gate.hold', 'gate.hole')) };
    expect(() => new StandardWebhook(webhook.secret).verify(tampered.body.toString(), headers(tampered))).toThrow();
    expect(() => stripe.webhooks.constructEvent(tampered.body, headers(tampered)['x-vigil-signature']!, webhook.secret)).toThrow();
    const other = (await createWebhook(r.url('/other'))).secret as string;
    expect(() => verifiedByBoth(r.received[0]!, other)).toThrow();
  });

  it('signs a ping the same way', async () => {
    const r = await receiver();
    const webhook = await createWebhook(r.url());
    expect((await call(server.url, 'POST', `/webhooks/${webhook.id}/test`)).body.delivered).toBe(true);
    expect(verifiedByBoth(r.received[0]!, webhook.secret)).toMatchObject({ event: 'ping' });
  });
});

describe('POST /webhooks/{id}/rotate-secret', () => {
  it('returns a new secret once; for 24 h both sign every attempt, in both headers', async () => {
    const r = await receiver();
    const webhook = await createWebhook(r.url());
    const before = Date.now();
    const res = await call(server.url, 'POST', `/webhooks/${webhook.id}/rotate-secret`);
    expect(res.status, res.text).toBe(200);
    const rotated = res.body;
    expect(rotated.secret).toMatch(STANDARD_SECRET);
    expect(rotated.secret).not.toBe(webhook.secret);
    expect(rotated.secret_hint).toBe(rotated.secret.slice(-8));
    const until = Date.parse(rotated.previous_secret_until);
    expect(until - before).toBeGreaterThanOrEqual(24 * 3600 * 1000 - 1000);
    expect(until - Date.now()).toBeLessThanOrEqual(24 * 3600 * 1000);
    // Shown once: a read has the hint and the overlap, never a secret.
    const read = (await call(server.url, 'GET', `/webhooks/${webhook.id}`)).body;
    expect(read).toMatchObject({ secret_hint: rotated.secret_hint, previous_secret_until: rotated.previous_secret_until });
    expect(JSON.stringify(read)).not.toContain(rotated.secret.slice(6, 30));

    await holdOne();
    await waitStatus(webhook.id, 'delivered', 'a delivery after the rotation');
    const request = r.received[0]!;
    expect(headers(request)['x-vigil-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    expect(headers(request)['webhook-signature']).toMatch(/^v1,\S+ v1,\S+$/);
    verifiedByBoth(request, rotated.secret);
    verifiedByBoth(request, webhook.secret);

    // Rotating again drops the oldest: the first secret no longer verifies.
    const again = (await call(server.url, 'POST', `/webhooks/${webhook.id}/rotate-secret`)).body;
    expect((await call(server.url, 'POST', `/webhooks/${webhook.id}/test`)).body.delivered).toBe(true);
    const ping = r.received.at(-1)!;
    verifiedByBoth(ping, again.secret);
    verifiedByBoth(ping, rotated.secret);
    expect(() => verifiedByBoth(ping, webhook.secret)).toThrow();
  });

  it('refuses a deactivated webhook (409), another org\'s or an unknown one (404), and a malformed body (400)', async () => {
    const r = await receiver();
    const webhook = await createWebhook(r.url());
    const other = await call(server.url, 'POST', `/webhooks/${webhook.id}/rotate-secret`, { key: otherOrgKey });
    expect([other.status, other.body.error.code]).toEqual([404, 'not_found']);
    expect((await call(server.url, 'POST', '/webhooks/99999/rotate-secret')).status).toBe(404);
    expect((await call(server.url, 'POST', `/webhooks/${webhook.id}/rotate-secret`, { raw: '{"secret":', headers: { 'content-type': 'application/json' } })).status).toBe(400);
    await call(server.url, 'DELETE', `/webhooks/${webhook.id}`);
    const gone = await call(server.url, 'POST', `/webhooks/${webhook.id}/rotate-secret`);
    expect([gone.status, gone.body.error.code]).toEqual([409, 'conflict']);
    // Nothing changed by the refusals.
    expect((await call(server.url, 'GET', `/webhooks/${webhook.id}`)).body).toMatchObject({ secret_hint: webhook.secret_hint, previous_secret_until: null });
  });
});

describe('POST /webhooks/{id}/deliveries/{delivery_id}/retry', () => {
  it('queues a dead delivery for one more attempt with the same id; delivered then, and refused once delivered', async () => {
    let down = true;
    const r = await receiver(() => (down ? 500 : 200));
    const webhook = await createWebhook(r.url());
    await holdOne();
    const dead = await waitStatus(webhook.id, 'dead', 'a dead delivery');
    expect(dead.attempts).toBe(6);
    down = false;
    const res = await call(server.url, 'POST', `/webhooks/${webhook.id}/deliveries/${dead.id}/retry`);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: dead.id, status: 'queued', envelope_id: dead.envelope_id, attempts: 6 });
    const delivered = await waitStatus(webhook.id, 'delivered', 'the retried delivery, delivered');
    expect(delivered).toMatchObject({ id: dead.id, attempts: 7, last_status_code: 200 });
    expect(r.received).toHaveLength(7);
    expect(new Set(r.received.map((q) => q.headers['webhook-id']))).toEqual(new Set([dead.envelope_id]));
    verifiedByBoth(r.received.at(-1)!, webhook.secret);

    const again = await call(server.url, 'POST', `/webhooks/${webhook.id}/deliveries/${dead.id}/retry`);
    expect([again.status, again.body.error.code]).toEqual([409, 'conflict']);
    expect(again.body.error.message).toContain('delivered');
  });

  it('sends once for retries asked at the same moment', async () => {
    let down = true;
    const r = await receiver(() => (down ? 500 : 200));
    const webhook = await createWebhook(r.url());
    await holdOne();
    const dead = await waitStatus(webhook.id, 'dead', 'a dead delivery');
    down = false;
    const path = `/webhooks/${webhook.id}/deliveries/${dead.id}/retry`;
    const answers = await Promise.all(Array.from({ length: 4 }, () => call(server.url, 'POST', path)));
    expect(answers.map((a) => [a.status, a.body.status])).toEqual(Array.from({ length: 4 }, () => [200, 'queued']));
    await waitStatus(webhook.id, 'delivered', 'the retried delivery, delivered');
    await quietFor(500);
    expect(r.received).toHaveLength(7);
    expect((await deliveries(webhook.id))[0]).toMatchObject({ id: dead.id, status: 'delivered', attempts: 7 });
  });

  it('leaves a retried delivery dead when it fails again, and answers one still queued as it is', async () => {
    let release!: () => void;
    const held = new Promise<number>((resolve) => (release = () => resolve(500)));
    // Six failures, then the retried attempt hangs until released (and fails).
    const r = await receiver((_, n) => (n < 6 ? 500 : held));
    const webhook = await createWebhook(r.url());
    await holdOne();
    const dead = await waitStatus(webhook.id, 'dead', 'a dead delivery');
    const path = `/webhooks/${webhook.id}/deliveries/${dead.id}/retry`;
    expect((await call(server.url, 'POST', path)).status).toBe(200);
    await waitFor(() => r.received.length === 7, 5_000, 'the retried attempt');
    // Asked again while that attempt is out: answered as it is, nothing more is sent.
    const again = await call(server.url, 'POST', path);
    expect([again.status, again.body.status, again.body.attempts]).toEqual([200, 'queued', 6]);
    release();
    const after = await waitFor(async () => (await deliveries(webhook.id)).find((d) => d.id === dead.id && d.status === 'dead' && d.attempts === 7), 5_000, 'dead again');
    expect(after.last_status_code).toBe(500);
    await quietFor(500);
    expect(r.received).toHaveLength(7);
  });

  it('answers 404 for an unknown delivery or another org\'s, 409 for a deactivated webhook, and changes nothing', async () => {
    const r = await receiver(() => 500);
    const webhook = await createWebhook(r.url());
    await holdOne();
    const dead = await waitStatus(webhook.id, 'dead', 'a dead delivery');
    for (const path of [`/webhooks/${webhook.id}/deliveries/999999/retry`, `/webhooks/${webhook.id}/deliveries/abc/retry`, `/webhooks/99999/deliveries/${dead.id}/retry`]) {
      const res = await call(server.url, 'POST', path);
      expect([res.status, res.body.error.code], path).toEqual([404, 'not_found']);
    }
    const other = await call(server.url, 'POST', `/webhooks/${webhook.id}/deliveries/${dead.id}/retry`, { key: otherOrgKey });
    expect(other.status).toBe(404);
    await call(server.url, 'DELETE', `/webhooks/${webhook.id}`);
    const off = await call(server.url, 'POST', `/webhooks/${webhook.id}/deliveries/${dead.id}/retry`);
    expect([off.status, off.body.error.code]).toEqual([409, 'conflict']);
    expect((await deliveries(webhook.id)).find((d) => d.id === dead.id)).toEqual(dead);
    expect(r.received).toHaveLength(6);
  });
});

describe('webhooks Vigil deactivates', () => {
  it('deactivates on 410 Gone at once (dead, no retry), logs it, and tells the org\'s other webhooks (not billed)', async () => {
    const gone = await receiver(() => 410);
    const watcher = await receiver();
    const leaving = await createWebhook(gone.url());
    // Subscribed to nothing that happens here: the notice comes whatever a webhook's events.
    const staying = await createWebhook(watcher.url(), ['review.rejected']);
    const month = new Date().toISOString().slice(0, 7);
    const billedBefore = (await call(server.url, 'GET', `/billing/statement?month=${month}`)).body;
    expect(billedBefore.usage.webhook_deliveries).toEqual(expect.any(Number));
    await holdOne();
    const dead = await waitStatus(leaving.id, 'dead', 'the delivery answered 410');
    expect(dead).toMatchObject({ attempts: 1, last_status_code: 410 });
    expect(dead.last_error).toContain('410');
    const after = (await call(server.url, 'GET', `/webhooks/${leaving.id}`)).body;
    expect(after).toMatchObject({ active: false, disabled_reason: 'the receiver answered 410 Gone' });

    await waitFor(() => watcher.received.length === 1, 5_000, 'the webhook.disabled notice');
    const notice = verifiedByBoth(watcher.received[0]!, staying.secret) as any;
    expect(notice).toMatchObject({
      event: 'webhook.disabled',
      org: 'acme',
      data: { webhook_id: leaving.id, host: new URL(gone.url()).host, reason: 'the receiver answered 410 Gone', deactivated_at: after.deactivated_at ?? expect.any(String) },
    });
    expect(headers(watcher.received[0]!)['x-vigil-event']).toBe('webhook.disabled');
    const listed = await waitStatus(staying.id, 'delivered', 'the notice, delivered');
    expect(listed).toMatchObject({ event: 'webhook.disabled', ledger_seq: 0 });
    expect(logs.some((l) => l.msg === 'webhook deactivated by Vigil' && l.fields?.['webhook'] === leaving.id)).toBe(true);
    // Vigil's own notice is not the org's traffic: the statement counts the one delivery the event made.
    const billedAfter = (await call(server.url, 'GET', `/billing/statement?month=${month}`)).body;
    expect(billedAfter.usage.webhook_deliveries).toBe(billedBefore.usage.webhook_deliveries + 1);
    await quietFor(500);
    expect(gone.received).toHaveLength(1);
  });
});

describe('VIGIL_WEBHOOK_DISABLE_DAYS', () => {
  let quick: TestServer;
  const quickLogs: { msg: string; fields?: Record<string, unknown> }[] = [];
  beforeAll(async () => {
    quick = await startServer(QUICK_DISABLE, undefined, quickLogs);
  });
  afterAll(async () => {
    await quick.close();
    removeDir(quick.dataDir);
  });

  it('deactivates a webhook whose every attempt failed for VIGIL_WEBHOOK_DISABLE_DAYS; a delivered attempt resets the clock', async () => {
    let failing = true;
    const r = await receiver(() => (failing ? 503 : 200));
    const webhook = await createWebhook(r.url(), GATES, quick.url);
    const watcher = await receiver();
    const staying = await createWebhook(watcher.url(), ['review.rejected'], quick.url);
    // Five failures in 0.4 s, then the 1.5 s wait: the sixth attempt, 1.9 s after the first failure,
    // is delivered. Without the reset the next failure would deactivate it at once (1.9 s > 1.728 s).
    await holdOne(quick.url);
    await waitFor(() => r.received.length >= 5, 5_000, 'five failed attempts');
    failing = false;
    await waitStatus(webhook.id, 'delivered', 'one delivered', quick.url);
    failing = true;
    const resetAt = Date.now();
    await holdOne(quick.url);
    await waitFor(async () => !(await call(quick.url, 'GET', `/webhooks/${webhook.id}`)).body.active, 15_000, 'the webhook deactivated');
    // Its failures from here: 0, 0.1, 0.2, 0.3, 0.4 s, then 1.9 s (past 1.728 s: deactivated).
    expect(Date.now() - resetAt).toBeGreaterThanOrEqual(1_728);
    const after = (await call(quick.url, 'GET', `/webhooks/${webhook.id}`)).body;
    expect(after.disabled_reason).toMatch(/^every attempt failed since \S+ \(0\.00002 days or more\)$/);
    const list = await deliveries(webhook.id, quick.url);
    // What waited for it is cancelled; nothing is sent after.
    expect(list.filter((d) => d.status === 'queued')).toEqual([]);
    const sent = r.received.length;
    await quietFor(800);
    expect(r.received).toHaveLength(sent);
    // Told: a log line, and a notice to the other webhook.
    expect(quickLogs.some((l) => l.msg === 'webhook deactivated by Vigil' && l.fields?.['webhook'] === webhook.id && l.fields?.['reason'] === after.disabled_reason)).toBe(true);
    await waitFor(() => watcher.received.length === 1, 5_000, 'the webhook.disabled notice');
    expect(verifiedByBoth(watcher.received[0]!, staying.secret)).toMatchObject({ event: 'webhook.disabled', data: { webhook_id: webhook.id, reason: after.disabled_reason } });
  });
});

describe('Retry-After', () => {
  it('waits what the receiver asks within the schedule\'s bounds (0.1 s to 1.5 s), with jitter above it', async () => {
    const asked = ['1', '60', new Date(Date.now() + 1_500).toUTCString(), 'soon'];
    const r = await receiver((_, n) => (n < asked.length ? { status: 503, headers: { 'retry-after': asked[n]! } } : 200));
    const webhook = await createWebhook(r.url());
    await holdOne();
    await waitStatus(webhook.id, 'delivered', 'delivered after four refusals');
    const gaps = r.received.slice(1).map((q, i) => (q.at - r.received[i]!.at) / 1000);
    // 1 s asked: 1 to 1.1 s; 60 s asked: held to 1.5 s; an HTTP date about a second ahead (whole
    // seconds: 0 to 1.5 s, at least the schedule's 0.1); an unreadable value: the schedule's 0.1 s.
    expect(gaps[0]).toBeGreaterThanOrEqual(0.95);
    expect(gaps[0]).toBeLessThan(2.5);
    expect(gaps[1]).toBeGreaterThanOrEqual(1.45);
    expect(gaps[1]).toBeLessThan(2.5);
    expect(gaps[2]).toBeGreaterThanOrEqual(0.05);
    expect(gaps[2]).toBeLessThan(2.5);
    expect(gaps[3]).toBeGreaterThanOrEqual(0.05);
    expect(gaps[3]).toBeLessThan(1);
  });
});
