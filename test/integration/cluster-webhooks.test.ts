import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { verifyWebhook } from '../../src/client/index.js';
import { makeRow } from '../../src/domain/ledger.js';
import { JetStreamLedgerLog } from '../../src/nats/jetstream-ledger-log.js';
import { LEDGER_STREAM, ledgerSubject } from '../../src/nats/ledger-stream.js';
import { partitionOf } from '../../src/nats/partition.js';
import { silentLogger } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';
import { quietFor, startReceiver, waitFor, type Receiver, type Received, type Reply } from '../support/receiver.js';
import { call, parseLines, removeDir, spawnServer, tempDir, type ServerProcess } from '../support/server.js';

/**
 * Webhooks and deliveries in cluster mode (DESIGN §8): two Vigil nodes as separate processes (so
 * the owner of the org can be killed -9), on one nats-server and on a 3-node NATS cluster whose
 * streams have 3 replicas. Webhooks are shared, deliveries are stored in the VIGIL_WEBHOOKS stream
 * before the event is answered, sent by the org's owner only, and taken over by the other node
 * with the same delivery id when the owner dies.
 *
 * Attempts: the guarantee is that every attempt whose outcome was recorded is counted once, and a
 * receiver may see one more request per handover (an attempt cut short by the owner's death). The
 * failover case kills the owner after its first attempt's outcome is replicated (the other node
 * lists it) and before the retry is due, so there is no unrecorded attempt: it asserts that the
 * receiver saw exactly as many requests as the record counts.
 */
const run = natsAvailable('cluster webhooks') ? describe : describe.skip;

const PARTITIONS = 4;
const ORG = 'acme';
const GATES = ['gate.hold', 'gate.alert', 'gate.collapse'];
/**
 * The first retry 3 s after a failure: the owner is killed between the first attempt and the
 * retry. Later retries 0.2 s apart: a delivery failing every attempt is dead in about 4 s.
 */
const RETRY_SECONDS = 3;

interface Node {
  name: string;
  dir: string;
  server: ServerProcess;
}

for (const natsNodes of [1, 3] as const) {
  const streams = natsNodes === 1 ? 'one nats-server' : 'a 3-node NATS cluster, streams with 3 replicas';
  run(`cluster mode: webhooks and deliveries (${streams})`, () => suite(natsNodes));
}

function suite(natsNodes: 1 | 3): void {
  let nats: NatsServers;
  const nodes: Node[] = [];
  const dirs: string[] = [];
  const receivers: Receiver[] = [];
  let agents = 0;

  const env = (node: string): Record<string, string> => ({
    VIGIL_NATS_URL: nats.urls.join(','),
    VIGIL_NODE_ID: node,
    VIGIL_PARTITIONS: String(PARTITIONS),
    VIGIL_LEASE_SECONDS: '1',
    VIGIL_WEBHOOK_ALLOW_PRIVATE: '1',
    VIGIL_WEBHOOK_RETRY_SCHEDULE: `${RETRY_SECONDS},0.2`,
  });
  const start = async (name: string, dir = tempDir('vigil-cluster-webhooks-')): Promise<Node> => {
    if (!dirs.includes(dir)) dirs.push(dir);
    const node = { name, dir, server: await spawnServer(dir, env(name)) };
    nodes.push(node);
    return node;
  };
  const url = (node: Node): string => node.server.url;
  const receiver = async (reply?: Reply): Promise<Receiver> => {
    const r = await startReceiver(reply);
    receivers.push(r);
    return r;
  };
  const ok = async (node: Node, method: string, path: string, body?: unknown): Promise<any> => {
    const res = await call(url(node), method, path, body === undefined ? {} : { body });
    expect(res.status, `${method} ${path} on ${node.name}: ${res.text}`).toBeLessThan(300);
    return res.body;
  };
  const newAgent = async (node: Node): Promise<string> => {
    const id = `agent-${++agents}`;
    await ok(node, 'POST', '/agents/', { agent_id: id, name: id });
    return id;
  };
  /** dti 0.99 is severe: hold, then alert, then collapse: one gate delivery per event. */
  const risky = (agent: string) => ({ agent_id: agent, event_type: 'output_generated', payload: {}, dti: 0.99 });
  const deliveries = (node: Node, webhook: number): Promise<any[]> => ok(node, 'GET', `/webhooks/${webhook}/deliveries?limit=500`);
  const owner = async (): Promise<Node> =>
    waitFor(async () => {
      const live = nodes.filter((n) => n.server.child.exitCode === null && n.server.child.signalCode === null);
      for (const node of live) {
        if ((await ok(node, 'GET', '/health')).partitions_owned.includes(partitionOf(ORG, PARTITIONS))) return node;
      }
      return null;
    }, 20_000, `an owner of ${ORG}'s partition`);

  beforeAll(async () => {
    nats = await startNats({ nodes: natsNodes });
    await Promise.all([start('node-a'), start('node-b')]);
    // Both take part: the partitions are split before anything is written.
    await waitFor(async () => {
      const owned = await Promise.all(nodes.map(async (n) => (await ok(n, 'GET', '/health')).partitions_owned.length));
      return owned.every((n) => n > 0) && owned.reduce((a, b) => a + b, 0) === PARTITIONS;
    }, 20_000, 'the partitions to be split between the two nodes');
  }, 60_000);

  afterAll(async () => {
    for (const node of nodes) {
      node.server.child.kill('SIGTERM');
      await node.server.exited;
    }
    await Promise.all(receivers.map((r) => r.close()));
    await nats?.stop();
    for (const dir of dirs) removeDir(dir);
  }, 30_000);

  let hook: { id: number; secret: string };
  let hook2: { id: number; secret: string };
  let hook3: { id: number; secret: string };
  let first: Receiver;

  it('shares webhooks: one created on a node is listed on the other at once', async () => {
    const [a, b] = nodes as [Node, Node];
    first = await receiver();
    hook = await ok(a, 'POST', '/webhooks', { url: first.url(), events: GATES });
    expect(hook.id).toBe(1);
    const { secret: _, ...view } = hook as any;
    // Keyed reads wait for the node's copy of the webhook stream: no polling needed.
    expect(await ok(b, 'GET', '/webhooks')).toEqual([view]);
    expect(await ok(b, 'GET', `/webhooks/${hook.id}`)).toEqual(view);
  });

  it('delivers events written on either node once each, signed, and lists the deliveries alike on both', async () => {
    const [a, b] = nodes as [Node, Node];
    const agent = await newAgent(b);
    // Held events on both nodes: whichever node owns the org writes them, and stores their deliveries before answering.
    for (const node of [a, b, a, b]) await ok(node, 'POST', '/events/', risky(agent));
    const stored = await deliveries(b, hook.id);
    expect(stored).toHaveLength(4);
    await waitFor(() => first.received.length >= 4, 10_000, 'four deliveries');
    await quietFor(500);
    expect(first.received).toHaveLength(4);
    const ids = first.received.map((r) => r.headers['x-vigil-delivery']);
    expect(new Set(ids).size).toBe(4);
    for (const request of first.received) verifyWebhook(request.body, request.headers['x-vigil-signature'] as string, hook.secret);
    await waitFor(async () => (await deliveries(a, hook.id)).every((d) => d.status === 'delivered'), 10_000, 'every delivery recorded delivered');
    const [onA, onB] = [await deliveries(a, hook.id), await deliveries(b, hook.id)];
    expect(onB).toEqual(onA);
    expect(onA.map((d) => d.envelope_id).sort()).toEqual([...ids].sort());
    expect(onA.map((d) => d.attempts)).toEqual([1, 1, 1, 1]);
    // Unique and increasing in ledger order (listed newest first).
    const deliveryIds = onA.map((d) => d.id).reverse();
    expect(deliveryIds).toEqual([...deliveryIds].sort((x, y) => x - y));
    expect(new Set(deliveryIds).size).toBe(4);
  });

  it('gives webhooks created concurrently on both nodes distinct ids from 1, with no gap', async () => {
    const [a, b] = nodes as [Node, Node];
    const quiet = await receiver();
    // review.escalated never happens here: these webhooks get nothing.
    const created = await Promise.all([a, b, a, b, a, b].map((node) => ok(node, 'POST', '/webhooks', { url: quiet.url(), events: ['review.escalated'] })));
    expect(created.map((w) => w.id).sort((x, y) => x - y)).toEqual([2, 3, 4, 5, 6, 7]);
    const [onA, onB] = [await ok(a, 'GET', '/webhooks'), await ok(b, 'GET', '/webhooks')];
    expect(onA.map((w: any) => w.id)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(onB).toEqual(onA);
  });

  it('counts deliveries for billing alike on both nodes', async () => {
    const [a, b] = nodes as [Node, Node];
    const [sa, sb] = [await ok(a, 'GET', '/billing/statement'), await ok(b, 'GET', '/billing/statement')];
    expect(sa.usage.webhook_deliveries).toBe(4);
    expect(sb.usage).toEqual(sa.usage);
  });

  it('retries a dead delivery asked on the node that does not own the org: the owner sends it, with the same id', async () => {
    let down = true;
    const failing = await receiver(() => (down ? 500 : 200));
    const writer = await owner();
    const other = nodes.find((n) => n !== writer)!;
    hook3 = await ok(other, 'POST', '/webhooks', { url: failing.url(), events: GATES });
    await ok(other, 'POST', '/events/', risky(await newAgent(other)));
    const dead = await waitFor(async () => (await deliveries(other, hook3.id)).find((d) => d.status === 'dead'), 20_000, 'a dead delivery');
    expect(failing.received).toHaveLength(6);
    down = false;
    const retried = await ok(other, 'POST', `/webhooks/${hook3.id}/deliveries/${dead.id}/retry`);
    expect(retried).toMatchObject({ id: dead.id, status: 'queued', envelope_id: dead.envelope_id });
    await waitFor(async () => (await deliveries(other, hook3.id))[0]?.status === 'delivered', 10_000, 'the retried delivery, delivered');
    expect((await deliveries(writer, hook3.id))[0]).toMatchObject({ id: dead.id, status: 'delivered', attempts: 7 });
    expect(new Set(failing.received.map((r) => r.headers['x-vigil-delivery']))).toEqual(new Set([dead.envelope_id]));
    await quietFor(300);
    expect(failing.received).toHaveLength(7);
    const again = await call(url(writer), 'POST', `/webhooks/${hook3.id}/deliveries/${dead.id}/retry`);
    expect([again.status, again.body.error.code]).toEqual([409, 'conflict']);
    await ok(writer, 'DELETE', `/webhooks/${hook3.id}`);
  }, 40_000);

  it('rotates a secret asked on the node that does not own the org: the owner signs with both, for both libraries; a 410 there deactivates and tells the others', async () => {
    const writer = await owner();
    const other = nodes.find((n) => n !== writer)!;
    const signed = await receiver();
    const gone = await receiver(() => 410);
    const hook4 = await ok(other, 'POST', '/webhooks', { url: signed.url(), events: GATES });
    const hook5 = await ok(other, 'POST', '/webhooks', { url: gone.url(), events: GATES });
    const rotated = await ok(other, 'POST', `/webhooks/${hook4.id}/rotate-secret`);
    expect(rotated.secret).not.toBe(hook4.secret);
    const firstBefore = first.received.length;
    await ok(other, 'POST', '/events/', risky(await newAgent(other)));
    await waitFor(() => signed.received.length >= 1, 10_000, 'the delivery to the rotated webhook');
    const request = signed.received[0]!;
    const stripe = new Stripe('sk_test_unused');
    for (const secret of [rotated.secret, hook4.secret]) {
      new StandardWebhook(secret).verify(request.body.toString('utf8'), request.headers as Record<string, string>);
      stripe.webhooks.constructEvent(request.body, request.headers['x-vigil-signature'] as string, secret);
    }
    // The 410: dead at once, deactivated on both nodes, and a notice to the org's other webhooks.
    await waitFor(async () => (await ok(other, 'GET', `/webhooks/${hook5.id}`)).active === false, 10_000, 'the 410 webhook deactivated');
    expect(await ok(writer, 'GET', `/webhooks/${hook5.id}`)).toMatchObject({ active: false, disabled_reason: 'the receiver answered 410 Gone' });
    const notice = await waitFor(() => signed.received.find((r) => r.headers['x-vigil-event'] === 'webhook.disabled'), 10_000, 'the webhook.disabled notice');
    new StandardWebhook(rotated.secret).verify(notice.body.toString('utf8'), notice.headers as Record<string, string>);
    expect(JSON.parse(notice.body.toString())).toMatchObject({ event: 'webhook.disabled', data: { webhook_id: hook5.id } });
    await waitFor(() => first.received.length === firstBefore + 2, 10_000, 'the gate delivery and the notice to the first webhook');
    expect(gone.received).toHaveLength(1);
    await ok(writer, 'DELETE', `/webhooks/${hook4.id}`);
  }, 40_000);

  it('fails over: the other node retries a delivery with the same id, and its attempts are counted once', async () => {
    // The second receiver fails its first request, then accepts.
    const flaky = await receiver((_request, n) => (n === 0 ? 500 : 200));
    const survivorOf = (dead: Node): Node => nodes.find((n) => n !== dead)!;
    const writer = await owner();
    hook2 = await ok(survivorOf(writer), 'POST', '/webhooks', { url: flaky.url(), events: GATES });
    const agent = await newAgent(writer);
    await ok(survivorOf(writer), 'POST', '/events/', risky(agent));

    // The first attempt failed and its outcome is recorded and replicated: the other node shows it.
    const survivor = survivorOf(await owner());
    const failed = await waitFor(async () => {
      const [d] = await deliveries(survivor, hook2.id);
      return d?.attempts === 1 ? d : null;
    }, 10_000, 'the first attempt to be recorded');
    expect(failed).toMatchObject({ status: 'queued', last_status_code: 500 });
    expect(flaky.received).toHaveLength(1);

    const dead = survivorOf(survivor);
    // Killed before the retry is due, so the dead node cannot have made it: the survivor must.
    expect(Date.now()).toBeLessThan(Date.parse(failed.next_attempt_at));
    dead.server.child.kill('SIGKILL');
    await dead.server.exited;

    await waitFor(async () => (await deliveries(survivor, hook2.id))[0]?.status === 'delivered', 20_000, 'the retry on the surviving node');
    const [done] = await deliveries(survivor, hook2.id);
    expect(done).toMatchObject({ id: failed.id, envelope_id: failed.envelope_id, status: 'delivered', attempts: 2, last_status_code: 200 });
    // Every request the receiver saw is one counted attempt (none was cut short: see the top), both with the same delivery id.
    expect(flaky.received).toHaveLength(done.attempts);
    expect(flaky.received.map((r: Received) => r.headers['x-vigil-delivery'])).toEqual([failed.envelope_id, failed.envelope_id]);
    for (const request of flaky.received) verifyWebhook(request.body, request.headers['x-vigil-signature'] as string, hook2.secret);
    expect((await ok(survivor, 'GET', '/health')).partitions_owned).toContain(partitionOf(ORG, PARTITIONS));

    // The survivor, now the owner, makes and sends new deliveries too.
    const before = first.received.length;
    await ok(survivor, 'POST', '/events/', risky(agent));
    await waitFor(() => first.received.length === before + 1 && flaky.received.length === 3, 10_000, 'deliveries made by the new owner');
    const ids = (await deliveries(survivor, hook2.id)).map((d) => d.id);
    expect(ids[0]).toBeGreaterThan(ids[1]);
  }, 60_000);

  it('a restarted node catches up: the same deliveries and counts as the survivor', async () => {
    const survivor = nodes.find((n) => n.server.child.exitCode === null && n.server.child.signalCode === null)!;
    const dead = nodes.find((n) => n !== survivor)!;
    nodes.splice(nodes.indexOf(dead), 1);
    const back = await start(dead.name, dead.dir);
    for (const id of [hook.id, hook2.id, hook3.id]) expect(await deliveries(back, id)).toEqual(await deliveries(survivor, id));
    expect(await ok(back, 'GET', '/webhooks')).toEqual(await ok(survivor, 'GET', '/webhooks'));
    const [sa, sb] = [await ok(survivor, 'GET', '/billing/statement'), await ok(back, 'GET', '/billing/statement')];
    // 4 first, 2 in the retry test (hook and hook3), 3 in the rotation test (hook, hook4, hook5; its
    // notices are not billed), 2 + 2 in the failover test (hook and hook2, twice).
    expect(sa.usage.webhook_deliveries).toBe(4 + 2 + 3 + 2 + 2);
    expect(sb.usage).toEqual(sa.usage);
  }, 30_000);

  it('takes over a row the dead owner appended but never stored deliveries for: delivered once, by the new owner', async () => {
    const writer = await owner();
    const survivor = nodes.find((n) => n !== writer)!;
    // The row the owner's writer would append next: a gate record continuing the org's chain.
    const rows = parseLines((await call(url(survivor), 'GET', '/audit/export')).text);
    const last = rows.at(-1)!;
    expect(last.kind).toBe('event');
    const body = { ...last.body, event_id: last.body.event_id + 1, action_id: last.body.action_id + 1 };
    const row = makeRow(Buffer.from(last.chain_hash, 'hex'), last.seq + 1, 'event', new Date().toISOString(), last.agent_id, body);
    const nc = await connect({ servers: nats.urls });
    const stream = await JetStreamLedgerLog.open(nc, { partitions: PARTITIONS, log: silentLogger() });
    const jsm = await jetstreamManager(nc);
    const fence = (await jsm.streams.getMessage(LEDGER_STREAM.stream, { last_by_subj: ledgerSubject({ ...LEDGER_STREAM, partitions: PARTITIONS }, ORG) }))!.seq;
    const [before1, before2] = [first.received.length, receivers.at(-1)!.received.length];
    try {
      // The owner appends, then dies before its deliveries are stored: frozen first, so it can do nothing more.
      writer.server.child.kill('SIGSTOP');
      expect(await stream.append(ORG, [row], fence)).toMatchObject({ ok: true });
      writer.server.child.kill('SIGKILL');
      await writer.server.exited;
    } finally {
      await stream.close();
      await nc.close();
    }
    const forRow = (r: Receiver): Received[] => r.received.filter((q) => JSON.parse(q.body.toString('utf8')).data.ledger_seq === row.seq);
    await waitFor(() => forRow(first).length === 1 && forRow(receivers.at(-1)!).length === 1, 20_000, 'the new owner to deliver the row');
    await quietFor(500);
    expect([first.received.length - before1, receivers.at(-1)!.received.length - before2]).toEqual([1, 1]);
    const stored = (await deliveries(survivor, hook.id)).filter((d) => d.ledger_seq === row.seq);
    expect(stored).toHaveLength(1);
    expect(forRow(first)[0]!.headers['x-vigil-delivery']).toBe(stored[0].envelope_id);
    // The chain goes on from that row on the new owner, and its next event is delivered too.
    const agent = last.agent_id as string;
    await ok(survivor, 'POST', '/events/', risky(agent));
    expect((await ok(survivor, 'GET', `/audit/${agent}/verify`))).toMatchObject({ ok: true });
    await waitFor(() => first.received.length === before1 + 2, 10_000, 'the next event delivered');
  }, 40_000);
}
