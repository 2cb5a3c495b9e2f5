import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VigilClient } from '../../src/client/index.js';
import { partitionOf } from '../../src/nats/partition.js';
import { freePorts, natsAvailable, startNats, type NatsServers } from '../support/nats.js';
import { ADMIN_KEY, call, parseLines, removeDir, runCli, spawnServer, startServer, tempDir, type ServerProcess, type TestServer } from '../support/server.js';

/**
 * Owner-aware clients (README, Cluster mode): two nodes over a real nats-server, A in this
 * process and B a process of its own (so it can be killed). `GET /cluster/map` names both; a
 * client given the other node's URL and `discover` sends to its org's owner, so (almost) nothing
 * is forwarded (counted by vigil_commands_forwarded_total); once the owner dies, it still gets
 * every event recorded, through the configured node.
 */
const run = natsAvailable('owner-aware clients') ? describe : describe.skip;

const PARTITIONS = 8;
const TOKEN = 'owner-metrics-token-0123456789';
const event = (n: number) => ({ agent_id: 'bot', event_type: 'output_generated' as const, payload: { n }, dti: 0.2 });

async function until(what: string, ok: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`not answered within ${ms} ms`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

async function forwarded(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
  const count = /^vigil_commands_forwarded_total (\d+)$/m.exec(text)?.[1];
  if (count === undefined) throw new Error(`no vigil_commands_forwarded_total in the metrics of ${url}`);
  return Number(count);
}

run('owner-aware clients', () => {
  let nats: NatsServers;
  const dirs: string[] = [];
  let a: TestServer;
  let b: ServerProcess;
  /** B's VIGIL_NODE_URL: another loopback address than its base URL's, so the map is seen to name it. */
  let bNode: string;
  /** Per node, an org whose partition it owns, with a key of that org. */
  const orgs = new Map<string, { org: string; key: string }>();
  const env = (node: string): Record<string, string> => ({
    VIGIL_NATS_URL: nats.urls.join(','),
    VIGIL_NODE_ID: node,
    VIGIL_PARTITIONS: String(PARTITIONS),
    VIGIL_LEASE_SECONDS: '1',
    VIGIL_METRICS_TOKEN: TOKEN,
  });
  const mapOf = async (url: string, key?: string) => (await call(url, 'GET', '/cluster/map', key === undefined ? {} : { key })).body;

  beforeAll(async () => {
    nats = await startNats({ nodes: 1 });
    for (let i = 0; i < 2; i++) dirs.push(tempDir('vigil-owner-'));
    a = await startServer(env('node-a'), dirs[0]);
    const [port] = (await freePorts(1)) as [number];
    bNode = `http://127.0.0.2:${port}`;
    b = await spawnServer(dirs[1]!, { ...env('node-b'), VIGIL_HOST: '0.0.0.0', VIGIL_PORT: String(port), VIGIL_NODE_URL: `${bNode}/` });
  }, 90_000);

  afterAll(async () => {
    b?.child.kill('SIGKILL');
    await b?.exited;
    await a?.close().catch(() => undefined);
    await nats?.stop();
    for (const dir of dirs) removeDir(dir);
  }, 60_000);

  it('GET /cluster/map names both nodes, as /health splits the partitions, with the same version on both', async () => {
    await until('the map to name both nodes on both', async () => {
      const [ma, mb] = await Promise.all([mapOf(a.url), mapOf(b.url)]);
      return new Set(ma.owners).size === 2 && !ma.owners.includes(null) && ma.owners.includes(bNode) && ma.version === mb.version;
    });
    const map = await mapOf(b.url);
    expect(map).toMatchObject({ org: 'acme', partitions: PARTITIONS, hash: 'fnv1a32' });
    expect(map.version).toMatch(/^[0-9a-f]{8}$/);
    const [ha, hb] = await Promise.all([call(a.url, 'GET', '/health'), call(b.url, 'GET', '/health')]);
    const owners = Array.from({ length: PARTITIONS }, (_, p) => (ha.body.partitions_owned.includes(p) ? a.url : hb.body.partitions_owned.includes(p) ? bNode : null));
    expect(map.owners).toEqual(owners);

    // Two orgs, one owned by each node, each with a key and an agent.
    for (const [node, url] of [['a', a.url], ['b', bNode]] as const) {
      const org = Array.from({ length: 100 }, (_, i) => `owner-${i}`).find((o) => map.owners[partitionOf(o, PARTITIONS)] === url)!;
      const cli = await runCli(['keys', 'create', '--org', org, '--scopes', 'events:write,admin'], { VIGIL_NATS_URL: nats.urls[0]!, VIGIL_DATA_DIR: dirs[0]! });
      expect(cli.code, cli.stderr).toBe(0);
      const key = cli.stdout.trim().split('\n').at(-1)!;
      orgs.set(node, { org, key });
      expect((await call(url, 'POST', '/agents', { key, body: { agent_id: 'bot', name: 'Bot' } })).status).toBe(201);
      expect((await mapOf(a.url, key)).org).toBe(org);
    }
  }, 120_000);

  it('a client with discover, given the other node, sends to its org\'s owner: (almost) nothing forwarded; without discover, every frame is', async () => {
    const before = { a: await forwarded(a.url), b: await forwarded(b.url) };
    // Each org's client is given the node that does not own it.
    const sends = [
      { own: orgs.get('a')!, url: b.url },
      { own: orgs.get('b')!, url: a.url },
    ];
    for (const [i, { own, url }] of sends.entries()) {
      const client = new VigilClient({ url, key: own.key, discover: true, maxBatch: 20, transport: i === 0 ? 'auto' : 'http' });
      const results = await Promise.all(Array.from({ length: 200 }, (_, n) => client.ingest(event(n))));
      await client.close();
      expect(new Set(results.map((r) => r.event_id)).size).toBe(200);
    }
    const after = { a: await forwarded(a.url), b: await forwarded(b.url) };
    // 10 frames an org at least: a few forwarded at most (a lease moving meanwhile), not all of them.
    expect(after.a - before.a + (after.b - before.b)).toBeLessThanOrEqual(2);

    // The same without discover: the counter does count what the non-owner forwards.
    const plain = new VigilClient({ url: b.url, key: orgs.get('a')!.key, maxBatch: 20 });
    await Promise.all(Array.from({ length: 200 }, (_, n) => plain.ingest(event(n))));
    await plain.close();
    const plainForwarded = (await forwarded(b.url)) - after.b;
    expect(plainForwarded).toBeGreaterThanOrEqual(10);
  }, 60_000);

  it('after the owner is killed, the client falls back to its configured node and every event is recorded once', async () => {
    const { org, key } = orgs.get('b')!;
    // No map read but the first and those after a failure: the fallback, not a periodic read, must carry it.
    const client = new VigilClient({ url: a.url, key, discover: { refreshMs: 120_000 }, maxBatch: 10, backoff: { initialMs: 50, maxMs: 500 } });
    const aBefore = await forwarded(a.url);
    const first = await Promise.all(Array.from({ length: 50 }, (_, n) => client.ingest({ ...event(n), idempotency_key: `fo-${n}` })));
    // Sent to B, the owner, not through A.
    expect((await forwarded(a.url)) - aBefore).toBeLessThanOrEqual(1);

    b.child.kill('SIGKILL');
    await b.exited;
    // A takes B's partitions about a lease and a half after B's last renewal: 30 s is ample.
    const second = await within(
      30_000,
      Promise.all(Array.from({ length: 50 }, (_, n) => client.ingest({ ...event(n), idempotency_key: `fo-${50 + n}` }))),
    );
    await client.close();
    const ids = [...first, ...second].map((r) => r.event_id);
    expect(new Set(ids).size).toBe(100);
    // A took B's partitions over, and its map says so.
    await until('the map to name A alone', async () => (await mapOf(a.url)).owners.every((o: string | null) => o === a.url));
    const rows = parseLines((await call(a.url, 'GET', '/audit/export', { key })).text).filter((r) => String(r.body?.idempotency_key ?? '').startsWith('fo-'));
    expect(rows.length).toBe(100);
    expect(rows.every((r) => r.org === undefined || r.org === org)).toBe(true);
  }, 90_000);
});

describe('owner-aware clients, embedded mode', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
    expect((await call(server.url, 'POST', '/agents', { body: { agent_id: 'bot', name: 'Bot' } })).status).toBe(201);
  });
  afterAll(async () => {
    await server?.close();
    removeDir(server.dataDir);
  });

  it('the map is one partition owned by the server itself, and a client with discover sends there', async () => {
    const map = await call(server.url, 'GET', '/cluster/map');
    expect(map.headers.get('cache-control')).toBe('no-store');
    expect(map.body).toEqual({ org: 'acme', partitions: 1, hash: 'fnv1a32', owners: [server.url], version: expect.stringMatching(/^[0-9a-f]{8}$/) });
    const client = new VigilClient({ url: server.url, key: ADMIN_KEY, discover: true });
    const results = await Promise.all(Array.from({ length: 20 }, (_, n) => client.ingest(event(n))));
    await client.close();
    expect(new Set(results.map((r) => r.event_id)).size).toBe(20);
  });
});
