import { afterEach, describe, expect, it } from 'vitest';
import { startReceiver, quietFor, waitFor, type Receiver, type Reply } from '../support/receiver.js';
import { call, removeDir, runCli, startServer, type TestServer } from '../support/server.js';

/**
 * How deliveries share the pool of 16 attempts (README "Webhooks"): at most 2 in flight per
 * webhook (1 until an attempt of it succeeds, and 1 while slow) and 8 per org, slow webhooks 4 in
 * all, orgs served round robin. Receivers that never answer hold their requests for the whole
 * sender timeout (30 s here), so anything that arrives elsewhere meanwhile got past them, not after
 * them; no retry comes within a test (the schedule waits a minute).
 */
const ENV = { VIGIL_WEBHOOK_ALLOW_PRIVATE: '1', VIGIL_WEBHOOK_RETRY_SCHEDULE: '60' };
const TIMEOUT_MS = 30_000;
/** Well inside TIMEOUT_MS: a delivery seen within it never waited for a silent receiver's attempt to end. */
const WITHIN_MS = 15_000;
const GATES = ['gate.hold', 'gate.alert', 'gate.collapse'];
const PER_WEBHOOK = 2;
/** A webhook not (yet, or no longer) known to answer: one attempt at a time. */
const UNPROVEN = 1;
const PER_ORG = 8;
const POOL = 16;
const SLOW_LANE = 4;
/** Fails its first request at once (so its webhook is slow before any timeout), then never answers. */
const failThenHang: Reply = (_, n) => (n === 0 ? 503 : 'hang');

let server: TestServer;
const receivers: Receiver[] = [];

// Receivers first: a silent one holds its attempt until the timeout, and the server's close waits for it.
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
  await server.close();
  removeDir(server.dataDir);
});

async function start(): Promise<void> {
  server = await startServer(ENV, undefined, undefined, { webhookTimeoutMs: TIMEOUT_MS });
}

async function receiver(reply: Reply = () => 200): Promise<Receiver> {
  const r = await startReceiver(reply);
  receivers.push(r);
  return r;
}

/** A key (events:write and admin) of a new org. */
async function orgKey(org: string): Promise<string> {
  const cli = await runCli(['keys', 'create', '--org', org, '--scopes', 'events:write,admin'], { VIGIL_DATA_DIR: server.dataDir });
  return cli.stdout.trim().split('\n').at(-1)!;
}

async function createWebhook(key: string | undefined, url: string): Promise<number> {
  const res = await call(server.url, 'POST', '/webhooks', { key, body: { url, events: GATES } });
  expect(res.status, res.text).toBe(200);
  return res.body.id;
}

/** `count` severe events of one fresh agent in one batch: each is held, so each gate webhook gets one delivery per event. */
async function holdMany(key: string | undefined, count: number): Promise<void> {
  const agent = `agent-${Math.random().toString(36).slice(2)}`;
  expect((await call(server.url, 'POST', '/agents/', { key, body: { agent_id: agent, name: agent } })).status).toBe(201);
  const events = Array.from({ length: count }, () => ({ agent_id: agent, event_type: 'output_generated', payload: {}, dti: 0.99 }));
  const res = await call(server.url, 'POST', '/events/batch', { key, body: { events } });
  expect(res.status, res.text).toBe(200);
  expect(res.body.results.every((r: { requires_human_review?: boolean }) => r.requires_human_review === true)).toBe(true);
}

async function deliveries(key: string | undefined, webhook: number): Promise<{ status: string; attempts: number }[]> {
  const res = await call(server.url, 'GET', `/webhooks/${webhook}/deliveries?limit=500`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

describe('fair delivery', () => {
  it('sends another org\'s delivery at once while 160 of one org wait on a receiver that never answers', async () => {
    await start();
    const other = await orgKey('globex');
    const silent = await receiver(() => 'hang');
    const healthy = await receiver();
    await createWebhook(undefined, silent.url());
    await holdMany(undefined, 160);
    await waitFor(() => silent.received.length >= UNPROVEN, WITHIN_MS, 'the silent receiver\'s first attempt');

    const webhook = await createWebhook(other, healthy.url());
    await holdMany(other, 1);
    await waitFor(() => healthy.received.length === 1, WITHIN_MS, 'the other org\'s delivery');
    const [delivered] = await waitFor(async () => {
      const list = await deliveries(other, webhook);
      return list[0]?.status === 'delivered' ? list : null;
    }, WITHIN_MS, 'the other org\'s delivery recorded');
    expect(delivered).toMatchObject({ status: 'delivered', attempts: 1 });
    // Still held open: none of the first org's attempts ended, by the timeout or otherwise.
    expect(silent.open).toBe(UNPROVEN);
    await quietFor(300); // a second attempt would start at once if the bound let it
    expect(silent.received).toHaveLength(UNPROVEN);
    expect(silent.mostOpen).toBe(UNPROVEN);
  });

  it('sends a third org\'s delivery at once while two orgs\' four never-answering receivers each hold their requests', async () => {
    await start();
    const orgs = [undefined, await orgKey('globex')];
    const silent: Receiver[] = [];
    for (const key of orgs) {
      for (let i = 0; i < 4; i++) {
        const r = await receiver(() => 'hang');
        silent.push(r);
        await createWebhook(key, r.url());
      }
      await holdMany(key, 40); // 160 deliveries of the org
    }
    const open = () => silent.reduce((n, r) => n + r.open, 0);
    await waitFor(() => open() === silent.length * UNPROVEN, WITHIN_MS, 'a request held at each silent receiver');

    const third = await orgKey('initech');
    const healthy = await receiver();
    const webhook = await createWebhook(third, healthy.url());
    await holdMany(third, 1);
    await waitFor(() => healthy.received.length === 1, WITHIN_MS, 'the third org\'s delivery');
    const [delivered] = await waitFor(async () => {
      const list = await deliveries(third, webhook);
      return list[0]?.status === 'delivered' ? list : null;
    }, WITHIN_MS, 'the third org\'s delivery recorded');
    expect(delivered).toMatchObject({ status: 'delivered', attempts: 1 });
    await quietFor(300); // a second attempt to a silent receiver would start at once if the bound let it
    // No attempt ended (by the timeout or otherwise), and each receiver got no more than its one.
    for (const r of silent) {
      expect(r.open).toBe(UNPROVEN);
      expect(r.received).toHaveLength(UNPROVEN);
      expect(r.mostOpen).toBe(UNPROVEN);
    }
    expect(open()).toBeLessThanOrEqual(POOL / 2);
  });

  it('holds slow webhooks (last attempt failed) to the slow lane across orgs; healthy ones of the same and other orgs go on', async () => {
    await start();
    const orgs = [undefined, await orgKey('globex')];
    const slow: Receiver[] = [];
    for (const key of orgs) {
      for (let i = 0; i < 4; i++) {
        const r = await receiver(failThenHang);
        slow.push(r);
        await createWebhook(key, r.url());
      }
    }
    const ownHealthy = await receiver();
    const ownWebhook = await createWebhook(undefined, ownHealthy.url());
    const count = 30;
    for (const key of orgs) await holdMany(key, count);
    const hanging = () => slow.reduce((n, r) => n + r.open, 0);
    await waitFor(() => slow.every((r) => r.received.length >= 1) && hanging() === SLOW_LANE, WITHIN_MS, `${SLOW_LANE} requests held in the slow lane`);

    const third = await orgKey('initech');
    const healthy = await receiver();
    const webhook = await createWebhook(third, healthy.url());
    await holdMany(third, 1);
    for (const [key, id, n] of [[third, webhook, 1], [undefined, ownWebhook, count]] as const) {
      await waitFor(async () => {
        const list = await deliveries(key, id);
        return list.length === n && list.every((d) => d.status === 'delivered' && d.attempts === 1);
      }, WITHIN_MS, `webhook ${id}'s ${n} deliveries recorded delivered`);
    }
    expect(healthy.received).toHaveLength(1);
    expect(ownHealthy.received).toHaveLength(count);
    await quietFor(300); // an attempt past the lane would start at once
    // No hanging request ended (no timeout yet), so the requests held now are all the lane ever let out.
    expect(hanging()).toBe(SLOW_LANE);
    expect(slow.reduce((n, r) => n + r.received.length, 0)).toBe(slow.length + SLOW_LANE);
    for (const r of slow) expect(r.mostOpen).toBe(1);
  });

  it('delivers all of an org\'s healthy webhook while four of its receivers never answer', async () => {
    await start();
    const silent = [await receiver(() => 'hang'), await receiver(() => 'hang'), await receiver(() => 'hang'), await receiver(() => 'hang')];
    const healthy = await receiver();
    for (const r of silent) await createWebhook(undefined, r.url());
    const webhook = await createWebhook(undefined, healthy.url());
    const count = 40;
    await holdMany(undefined, count);

    await waitFor(() => healthy.received.length === count, WITHIN_MS, `all ${count} deliveries of the healthy webhook`);
    const list = await waitFor(async () => {
      const all = await deliveries(undefined, webhook);
      return all.length === count && all.every((d) => d.status === 'delivered') ? all : null;
    }, WITHIN_MS, 'all recorded delivered');
    expect(list.every((d) => d.attempts === 1)).toBe(true);
    for (const r of silent) {
      expect(r.open).toBe(UNPROVEN);
      expect(r.received).toHaveLength(UNPROVEN);
      expect(r.mostOpen).toBe(UNPROVEN);
    }
  });

  it('holds at most 16 attempts in flight, 8 an org, 2 a webhook; slow receivers do not hold up ingest', async () => {
    await start();
    const answers: (() => void)[] = [];
    const held: Reply = () => new Promise<number>((resolve) => answers.push(() => resolve(200)));
    const orgs = [{ key: undefined as string | undefined, receivers: [] as Receiver[], webhooks: [] as number[] }];
    orgs.push({ key: await orgKey('globex'), receivers: [], webhooks: [] });
    const third = { key: await orgKey('initech'), receivers: [await receiver()], webhooks: [] as number[] };
    third.webhooks.push(await createWebhook(third.key, third.receivers[0]!.url()));
    const allDelivered = async (key: string | undefined, webhook: number, n: number) => {
      const list = await waitFor(async () => {
        const all = await deliveries(key, webhook);
        return all.length === n && all.every((d) => d.status === 'delivered') ? all : null;
      }, WITHIN_MS, `webhook ${webhook}'s ${n} deliveries recorded delivered`);
      expect(list.every((d) => d.attempts === 1)).toBe(true);
    };
    for (const org of orgs) {
      for (let i = 0; i < 5; i++) {
        const r = await receiver();
        org.receivers.push(r);
        org.webhooks.push(await createWebhook(org.key, r.url()));
      }
      // One delivery each, answered: the webhooks are healthy, so each may have 2 in flight.
      await holdMany(org.key, 1);
      for (const webhook of org.webhooks) await allDelivered(org.key, webhook, 1);
      for (const r of org.receivers) r.reply = held;
      await holdMany(org.key, 3); // answered while every request is held
    }
    const inFlight = (org: (typeof orgs)[number]) => org.receivers.reduce((n, r) => n + r.open, 0);
    await waitFor(() => answers.length === POOL, WITHIN_MS, `${POOL} attempts in flight`);
    // A third org's delivery waits for a free slot of the pool.
    await holdMany(third.key, 1);
    await quietFor(300); // an attempt past a bound would start at once
    expect(third.receivers[0]!.received).toHaveLength(0);
    for (const org of orgs) {
      expect(inFlight(org)).toBe(PER_ORG);
      for (const r of org.receivers) expect(r.mostOpen).toBeLessThanOrEqual(PER_WEBHOOK);
    }
    expect(answers).toHaveLength(POOL);

    for (const org of orgs) for (const r of org.receivers) r.reply = () => 200;
    for (const answer of answers.splice(0)) answer();
    for (const org of [...orgs, third]) {
      for (const webhook of org.webhooks) await allDelivered(org.key, webhook, org === third ? 1 : 4);
    }
    for (const org of orgs) for (const r of org.receivers) expect(r.mostOpen).toBeLessThanOrEqual(PER_WEBHOOK);
  });
});
