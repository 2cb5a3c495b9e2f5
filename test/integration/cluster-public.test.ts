import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Packr } from 'msgpackr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KvPublicRecords } from '../../src/nats/kv-public-records.js';
import type { PublicSource } from '../../src/domain/public-record.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';
import { call, removeDir, startServer, tempDir, type TestServer } from '../support/server.js';

/**
 * Public reads in cluster mode come from the vigil_public bucket the orgs' owners publish to
 * (coalesced, every 250 ms) and every node mirrors: never from a forward, the same bytes and
 * ETags as embedded mode for the same ledger. One partition, owned by node A (started first).
 */
const run = natsAvailable('cluster public records') ? describe : describe.skip;

const URLS = { VIGIL_APP_URL: 'https://vigil.example', VIGIL_BASE_URL: 'https://api.vigil.example' };
const STREAM = 'KV_vigil_public';
const packr = new Packr({ useRecords: false, moreTypes: false });
const event = (agent_id: string) => ({ agent_id, event_type: 'output_generated', payload: {}, dti: 0.3 });

async function until(what: string, ok: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

run('cluster public records', () => {
  let nats: NatsServers;
  let nc: NatsConnection;
  const dirs: string[] = [];
  const logs: { msg: string; fields?: Record<string, unknown> }[] = [];
  let a: TestServer;
  let b: TestServer;
  /** Nodes still running (a runtime is closed once). */
  const running = new Set<TestServer>();
  const stop = async (server: TestServer): Promise<void> => {
    if (running.delete(server)) await server.close();
  };
  const env = (node: string): Record<string, string> => ({
    VIGIL_NATS_URL: nats.urls.join(','),
    VIGIL_NODE_ID: node,
    VIGIL_PARTITIONS: '1',
    VIGIL_LEASE_SECONDS: '2',
    ...URLS,
    VIGIL_PUBLIC_RATE_LIMIT: '100000',
  });
  const dir = (): string => {
    const made = tempDir('vigil-public-');
    dirs.push(made);
    return made;
  };
  const owns = async (server: TestServer): Promise<boolean> => (await call(server.url, 'GET', '/health')).body.partitions_owned.length === 1;
  const pub = (server: TestServer, path: string, headers: Record<string, string> = {}) => call(server.url, 'GET', path, { key: null, headers });
  /** The agent's record as its owner knows it now: public once it shows this many ledger records. */
  const records = async (agent: string): Promise<number> => (await call(a.url, 'GET', `/agents/${agent}`)).body.ledger_records;

  beforeAll(async () => {
    nats = await startNats({ nodes: 1 });
    nc = await connect({ servers: nats.urls });
    a = await startServer(env('node-a'), dir(), logs);
    running.add(a);
    await until('node A to own the partition', () => owns(a));
    b = await startServer(env('node-b'), dir());
    running.add(b);
    expect(await owns(b)).toBe(false);
    for (const agent_id of ['pub', 'other', 'priv']) expect((await call(a.url, 'POST', '/agents/', { body: { agent_id, name: `Bot ${agent_id}` } })).status).toBe(201);
    for (const agent_id of ['pub', 'other']) expect((await call(b.url, 'PATCH', `/admin/agents/${agent_id}`, { body: { public: true, public_links: [{ kind: 'website', url: `https://${agent_id}.example` }] } })).status).toBe(200);
  }, 60_000);

  afterAll(async () => {
    for (const server of [...running]) await stop(server).catch(() => undefined);
    await nc?.close();
    await nats?.stop();
    for (const made of dirs) removeDir(made);
  });

  it('shows an agent\'s change on a reader only with the org value after it (a flush appears whole)', async () => {
    const options = { replicas: 1, bucket: 'test_public_staging' };
    const [writer, reader] = [await KvPublicRecords.open(nc, options), await KvPublicRecords.open(nc, options)];
    try {
      const source: PublicSource = { agent_id: 'x:1', name: 'X', kind: 'production', observed: true, is_active: true, public: true, public_links: [], gate: null, bii: null, policy_digest: null, ledger_records: 1, last_event_at: null };
      const barrier = async (n: number): Promise<void> => {
        await writer.putOrg('barrier', { head: null, length: n });
        await until('the barrier to reach the reader', async () => reader.latestOrg('barrier')?.length === n);
      };
      await writer.putAgent('initech', 'x:1', source);
      await barrier(1);
      expect(reader.latestAgent('initech', 'x:1')).toEqual(source);
      expect(reader.org('initech')?.agents.size).toBe(0);
      await writer.putOrg('initech', { head: 'ab', length: 1 });
      await until('the org value to reach the reader', async () => reader.org('initech')?.head === 'ab');
      expect(reader.org('initech')?.agents.get('x:1')).toEqual(source);
      await writer.removeAgent('initech', 'x:1');
      await barrier(2);
      expect(reader.org('initech')?.agents.has('x:1')).toBe(true);
      await writer.putOrg('initech', { head: 'cd', length: 2 });
      await until('the removal to show', async () => reader.org('initech')?.agents.has('x:1') === false);
    } finally {
      await writer.close();
      await reader.close();
    }
  });

  it('shows a public agent on every node after a write, the same bytes and ETag on each', async () => {
    for (const writer of [a, b]) expect((await call(writer.url, 'POST', '/events/', { body: event('pub') })).status).toBe(200);
    const want = await records('pub');
    for (const node of [a, b]) await until(`node ${node.url} to show the write`, async () => (await pub(node, '/public/agents/acme/pub')).body.ledger_records === want);
    const [onA, onB] = [await pub(a, '/public/agents/acme/pub'), await pub(b, '/public/agents/acme/pub')];
    expect(onB.text).toBe(onA.text);
    expect(onB.headers.get('etag')).toBe(onA.headers.get('etag'));
    expect(onB.body).toMatchObject({ org: 'acme', agent_id: 'pub', name: 'Bot pub', ledger_records: want, public_links: [{ kind: 'website', url: 'https://pub.example' }] });
    expect((await pub(b, '/public/agents/acme/priv')).status).toBe(404);
  }, 30_000);

  it('coalesces: an org writing fast puts its keys at most once per 250 ms interval', async () => {
    const jsm = await jetstreamManager(nc);
    const before = (await jsm.streams.info(STREAM)).state.last_seq;
    const started = Date.now();
    for (let i = 0; i < 60; i++) expect((await call(a.url, 'POST', '/events/', { body: event(i % 2 === 0 ? 'pub' : 'other') })).status).toBe(200);
    const want = await records('pub');
    await until('the last write to be published', async () => (await pub(b, '/public/agents/acme/pub')).body.ledger_records === want);
    const intervals = Math.ceil((Date.now() - started) / 250) + 1;
    // Each flush writes at most the org's three keys (two agents, then the org).
    const puts = (await jsm.streams.info(STREAM)).state.last_seq - before;
    expect(puts).toBeGreaterThan(0);
    expect(puts).toBeLessThanOrEqual(3 * intervals);
  }, 30_000);

  it('answers 304 to a current ETag on either node, and the new body to a stale one', async () => {
    const first = await pub(b, '/public/agents/acme');
    const etag = first.headers.get('etag')!;
    for (const node of [a, b]) {
      const again = await pub(node, '/public/agents/acme', { 'if-none-match': etag });
      expect(again.status).toBe(304);
      expect(again.headers.get('etag')).toBe(etag);
    }
    expect((await call(a.url, 'POST', '/events/', { body: event('priv') })).status).toBe(200);
    await until('node B to show the new head', async () => (await pub(b, '/public/agents/acme', { 'if-none-match': etag })).status === 200);
    const next = await pub(b, '/public/agents/acme', { 'if-none-match': etag });
    expect(next.body.agents[0].ledger_head).not.toBe(first.body.agents[0].ledger_head);
    expect(next.headers.get('etag')).not.toBe(etag);
  }, 30_000);

  it('removes a delisted agent and a retired one from every node', async () => {
    expect((await call(b.url, 'PATCH', '/admin/agents/other', { body: { public: false } })).status).toBe(200);
    for (const node of [a, b]) {
      await until(`node ${node.url} to drop the delisted agent`, async () => (await pub(node, '/public/agents/acme/other')).status === 404);
      expect((await pub(node, '/public/agents/acme')).body).toMatchObject({ total: 1, agents: [{ agent_id: 'pub' }] });
    }
    expect((await call(b.url, 'PATCH', '/admin/agents/other', { body: { public: true } })).status).toBe(200);
    for (const node of [a, b]) await until(`node ${node.url} to list it again`, async () => (await pub(node, '/public/agents/acme')).body.total === 2);
    expect((await call(a.url, 'PATCH', '/admin/agents/other', { body: { is_active: false } })).status).toBe(200);
    for (const node of [a, b]) await until(`node ${node.url} to drop the retired agent`, async () => (await pub(node, '/public/agents/acme/other')).status === 404 && (await pub(node, '/public/agents/acme')).body.total === 1);
  }, 30_000);

  it('keeps taking writes while the bucket refuses puts, logs it, and publishes once it takes them again', async () => {
    const jsm = await jetstreamManager(nc);
    const { config, state } = await jsm.streams.info(STREAM);
    // Every value is refused as too large (nothing stored is dropped); the ledger stream is untouched.
    await jsm.streams.update(STREAM, { ...config, max_msg_size: 8 });
    try {
      const before = await records('pub');
      for (let i = 0; i < 5; i++) expect((await call(b.url, 'POST', '/events/', { body: event('pub') })).status).toBe(200);
      await until('the failure to be logged', async () => logs.some((l) => l.msg === 'publishing public records failed; retried every interval'));
      for (const node of [a, b]) expect((await pub(node, '/public/agents/acme/pub')).body.ledger_records).toBeLessThanOrEqual(before);
    } finally {
      await jsm.streams.update(STREAM, config);
    }
    expect((await jsm.streams.info(STREAM)).state.messages).toBe(state.messages);
    const want = await records('pub');
    for (const node of [a, b]) await until(`node ${node.url} to show the writes made meanwhile`, async () => (await pub(node, '/public/agents/acme/pub')).body.ledger_records === want);
    expect(logs.some((l) => l.msg === 'publishing public records works again')).toBe(true);
  }, 30_000);

  it('a new owner republishes its view: what the bucket held wrongly is replaced without a write', async () => {
    const kv = await new Kvm(nc).open('vigil_public');
    const bot = packr.unpack((await kv.get('acme.pub'))!.value) as Record<string, unknown>;
    const org = (await kv.get('acme'))!.value;
    await kv.put('acme.pub', packr.pack({ ...bot, name: 'Tampered' }));
    await kv.put('acme', org);
    // Served from the bucket, not from the node's own ledger: the wrong value shows.
    await until('node B to show the tampered record', async () => (await pub(b, '/public/agents/acme/pub')).body.name === 'Tampered');
    await stop(a);
    await until('node B to own the partition', () => owns(b));
    await until('node B to republish its view', async () => (await pub(b, '/public/agents/acme/pub')).body.name === 'Bot pub', 10_000);
  }, 30_000);

  it('answers the same bytes as embedded mode for the same ledger', async () => {
    const paths = ['/public/agents/acme/pub', '/public/agents/acme', '/public/agents/acme?limit=1&offset=1', '/public/agents/acme/other', '/a/acme/pub'];
    const cluster = await Promise.all(paths.map((path) => pub(b, path)));
    // Node A's replica of the stream, opened in embedded mode: its answers come from its own projection.
    await stop(b);
    const embedded = await startServer({ ...URLS, VIGIL_PUBLIC_RATE_LIMIT: '100000' }, dirs[0]);
    try {
      expect((await call(embedded.url, 'GET', '/agents/pub')).body.ledger_records).toBe(cluster[0]!.body.ledger_records);
      for (const [i, path] of paths.entries()) {
        const local = await pub(embedded, path);
        expect(local.status, path).toBe(cluster[i]!.status);
        expect(local.text, path).toBe(cluster[i]!.text);
        expect(local.headers.get('etag'), path).toBe(cluster[i]!.headers.get('etag'));
      }
    } finally {
      await embedded.close();
    }
  }, 60_000);
});
