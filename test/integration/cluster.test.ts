import { join as joinPath } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StartError } from '../../src/errors.js';
import { partitionOf } from '../../src/nats/partition.js';
import { openLmdb } from '../../src/store/lmdb.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';
import { call, parseLines, removeDir, runCli, startServer, tempDir, type TestServer } from '../support/server.js';

/**
 * Cluster mode end to end (DESIGN §8): two Vigil runtimes with their own data dirs joined through
 * a real nats-server; every route answered on both, one writer per org, reads that see every
 * acknowledged write, a replica rebuilt from the stream.
 */
const run = natsAvailable('cluster mode') ? describe : describe.skip;

const PARTITIONS = 8;
const event = (i: number) => ({ agent_id: 'bot', event_type: 'output_generated', payload: { i }, dti: 0.2 });

async function until(what: string, ok: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

run('cluster mode', () => {
  let nats: NatsServers;
  const dirs: string[] = [];
  const nodes: TestServer[] = [];
  const env = (node: string): Record<string, string> => ({
    VIGIL_NATS_URL: nats.urls.join(','),
    VIGIL_NODE_ID: node,
    VIGIL_PARTITIONS: String(PARTITIONS),
    VIGIL_LEASE_SECONDS: '1',
  });
  const join = async (node: string): Promise<TestServer> => {
    const dir = tempDir('vigil-cluster-');
    dirs.push(dir);
    const server = await startServer(env(node), dir);
    nodes.push(server);
    return server;
  };

  beforeAll(async () => {
    nats = await startNats({ nodes: 1 });
  }, 60_000);

  afterAll(async () => {
    for (const node of nodes) await node.close().catch(() => undefined);
    await nats?.stop();
    for (const dir of dirs) removeDir(dir);
  });

  it('says mode "cluster", its node and the partitions it owns; two nodes split them', async () => {
    const a = await join('node-a');
    await until('node-a to own every partition', async () => (await call(a.url, 'GET', '/health')).body.partitions_owned.length === PARTITIONS);
    const b = await join('node-b');
    await until('the partitions to be shared', async () => {
      const [ha, hb] = await Promise.all([call(a.url, 'GET', '/health'), call(b.url, 'GET', '/health')]);
      const owned = [...ha.body.partitions_owned, ...hb.body.partitions_owned];
      return hb.body.partitions_owned.length > 0 && owned.length === PARTITIONS && new Set(owned).size === PARTITIONS;
    });
    const health = (await call(b.url, 'GET', '/health')).body;
    expect(health).toMatchObject({ status: 'ok', mode: 'cluster', node: 'node-b' });
    expect(Object.keys(health).sort()).toEqual(['mode', 'node', 'partitions_owned', 'status', 'version']);
  }, 60_000);

  it('takes writes on either node into one chain: ids unique and increasing, each read on the other node at once', async () => {
    const [a, b] = nodes as [TestServer, TestServer];
    expect((await call(a.url, 'POST', '/agents', { body: { agent_id: 'bot', name: 'Bot' } })).status).toBe(201);
    const ids: number[] = [];
    for (let i = 0; i < 20; i++) {
      const [writer, reader] = i % 2 === 0 ? [a, b] : [b, a];
      const res = await call(writer.url, 'POST', '/events', { body: event(i) });
      expect(res.status).toBe(200);
      ids.push(res.body.event_id);
      // Read-your-writes on the other node: its replica waits for the org's last batch.
      const agent = await call(reader.url, 'GET', '/agents/bot');
      expect(agent.body.ledger_records).toBe(i + 2);
    }
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect(new Set(ids).size).toBe(ids.length);
    for (const node of [a, b]) {
      const verify = await call(node.url, 'GET', '/audit/bot/verify');
      expect(verify.body).toMatchObject({ ok: true, length: 21 });
    }
    const exportA = parseLines((await call(a.url, 'GET', '/audit/export')).text);
    const exportB = parseLines((await call(b.url, 'GET', '/audit/export')).text);
    expect(exportB).toEqual(exportA);
    expect(exportA.length).toBe(21);
  }, 60_000);

  it('concurrent writes on both nodes: every acknowledged event is in the chain once, no fork', async () => {
    const [a, b] = nodes as [TestServer, TestServer];
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => call((i % 2 === 0 ? a : b).url, 'POST', '/events', { body: event(100 + i) })));
    expect(results.map((r) => r.status)).toEqual(results.map(() => 200));
    const ids = results.map((r) => r.body.event_id as number);
    expect(new Set(ids).size).toBe(60);
    const rows = parseLines((await call(b.url, 'GET', '/audit/export')).text);
    expect(rows.length).toBe(81);
    expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
    expect((await call(a.url, 'GET', '/audit/bot/verify')).body).toMatchObject({ ok: true, length: 81 });
  }, 60_000);

  it('honours a key created on one node on the other at once (the registry is in replicated KV)', async () => {
    const [a, b] = nodes as [TestServer, TestServer];
    const created = await call(a.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'], name: 'runtime' } });
    expect(created.status).toBe(201);
    await until('node b to know the key', async () => (await call(b.url, 'GET', '/orgs/me', { key: created.body.key })).status === 200, 5_000);
    const seen = await call(b.url, 'GET', '/orgs/me', { key: created.body.key });
    expect(seen.body).toMatchObject({ slug: 'acme', key: { id: created.body.id, name: 'runtime', scopes: ['events:write'] } });
    expect((await call(b.url, 'POST', '/events', { key: created.body.key, body: event(999) })).status).toBe(200);
  }, 30_000);

  it('refuses a key revoked by the CLI on every node, once each has seen the revocation (milliseconds)', async () => {
    const [a, b] = nodes as [TestServer, TestServer];
    const created = await call(a.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'], name: 'to revoke' } });
    await until('node b to know the key', async () => (await call(b.url, 'GET', '/orgs/me', { key: created.body.key })).status === 200, 5_000);
    const revoked = await runCli(['keys', 'revoke', created.body.id], { VIGIL_NATS_URL: nats.urls.join(','), VIGIL_DATA_DIR: joinPath(dirs[0]!, 'cli-never') });
    expect(revoked).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(revoked.stdout)).toMatchObject({ id: created.body.id, org: 'acme', revoked_at: expect.any(String) });
    const started = Date.now();
    for (const node of [a, b]) {
      await until('the node to refuse the revoked key', async () => (await call(node.url, 'GET', '/orgs/me', { key: created.body.key })).status === 401, 5_000);
      const refused = await call(node.url, 'POST', '/events', { key: created.body.key, body: event(1000) });
      expect(refused.status).toBe(401);
      expect(refused.body.error.message).toBe('this API key was revoked');
    }
    expect(Date.now() - started).toBeLessThan(5_000);
    // Another key of the org still works.
    expect((await call(b.url, 'GET', '/orgs/me')).status).toBe(200);
    expect(await runCli(['keys', 'revoke', 'key_nope'], { VIGIL_NATS_URL: nats.urls.join(','), VIGIL_DATA_DIR: joinPath(dirs[0]!, 'cli-never') })).toMatchObject({ code: 1, stdout: '', stderr: 'vigil keys: key key_nope not found\n' });
  }, 30_000);

  it('answers keyed reads of an org from its owner: the same answer on either node, read-your-writes through the owner', async () => {
    const [a, b] = nodes as [TestServer, TestServer];
    const partition = partitionOf('acme', PARTITIONS);
    const ownedByA = ((await call(a.url, 'GET', '/health')).body.partitions_owned as number[]).includes(partition);
    const [owner, other, ownerName] = ownedByA ? [a, b, 'node-a'] : [b, a, 'node-b'];
    // A write on the owner, read at once on the other node: the owner answers it.
    const written = await call(owner.url, 'POST', '/events', { body: event(2000) });
    expect(written.status).toBe(200);
    const [here, there] = await Promise.all([call(owner.url, 'GET', '/agents/bot'), call(other.url, 'GET', '/agents/bot')]);
    expect(there.status).toBe(200);
    expect(there.body).toEqual(here.body);
    expect(here.headers.get('x-vigil-answered-by')).toBeNull();
    expect(there.headers.get('x-vigil-answered-by')).toBe(ownerName);
    // Errors come back as the owner wrote them, status and body.
    const missing = await call(other.url, 'GET', '/agents/nobody');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('not_found');
    expect(missing.headers.get('x-vigil-answered-by')).toBe(ownerName);
    // Query strings travel; bytes come back whole (an inclusion proof is written as bytes).
    const proof = await call(other.url, 'GET', `/audit/proof/inclusion?seq=${written.body.event_id}`);
    expect(proof.status).toBe(200);
    expect(proof.body).toEqual((await call(owner.url, 'GET', `/audit/proof/inclusion?seq=${written.body.event_id}`)).body);
    // The streamed export is answered by the node it reaches, from its own copy (caught up first).
    const exported = await call(other.url, 'GET', '/audit/export');
    expect(exported.status).toBe(200);
    expect(exported.headers.get('x-vigil-answered-by')).toBeNull();
    expect(parseLines(exported.text).at(-1).seq).toBe(Number(exported.headers.get('x-vigil-ledger-head-seq')));
  });

  /** Per org written by the next test, the node owning it then. */
  const owners = new Map<string, string>();

  it('holds in each node\'s copy only the partitions it owns, and still answers every keyed read right on both (through the owner)', async () => {
    const [a, b] = nodes as [TestServer, TestServer];
    const ownedByA = new Set<number>((await call(a.url, 'GET', '/health')).body.partitions_owned);
    // Two orgs on each node's partitions.
    const picked: string[] = [];
    for (let i = 0; picked.length < 4; i++) {
      const org = `held${i}`;
      const onA = ownedByA.has(partitionOf(org, PARTITIONS));
      if (picked.filter((o) => ownedByA.has(partitionOf(o, PARTITIONS)) === onA).length < 2) picked.push(org);
    }
    const keys = await Promise.all(
      picked.map(async (org) => {
        const made = await runCli(['keys', 'create', '--org', org, '--scopes', 'events:write,admin', '--name', 'ci'], { VIGIL_NATS_URL: nats.urls.join(','), VIGIL_DATA_DIR: tempDir('vigil-cli-') });
        expect(made.code).toBe(0);
        return made.stdout.split('\n')[1]!.trim();
      }),
    );
    for (const [i, org] of picked.entries()) {
      owners.set(org, ownedByA.has(partitionOf(org, PARTITIONS)) ? 'node-a' : 'node-b');
      const key = keys[i]!;
      expect((await call(a.url, 'POST', '/agents', { key, body: { agent_id: 'bot', name: 'Bot' } })).status).toBe(201);
      for (let n = 0; n < 6; n++) {
        const [writer, reader] = n % 2 === 0 ? [a, b] : [b, a];
        expect((await call(writer.url, 'POST', '/events', { key, body: event(n) })).status).toBe(200);
        const agent = await call(reader.url, 'GET', '/agents/bot', { key });
        expect(agent.body.ledger_records).toBe(n + 2);
      }
    }
  }, 60_000);

  it('rebuilds a deleted replica from the stream on start', async () => {
    const b = nodes.pop()!;
    await b.close();
    // The orgs of node-a's partitions never landed in node-b's copy (its keyed reads went to node-a).
    const copy = openLmdb(b.dataDir, 'process');
    const held = new Set(copy.ledger.orgs());
    await copy.close();
    expect(owners.size).toBe(4);
    for (const [org, owner] of owners) expect({ org, held: held.has(org) }).toEqual({ org, held: owner === 'node-b' });
    // Every record the tests above wrote: 82, and one more by the keyed-reads test.
    const written = parseLines((await call(nodes[0]!.url, 'GET', '/audit/export')).text).length;
    expect(written).toBe(83);
    const fresh = await join('node-b');
    const rows = parseLines((await call(fresh.url, 'GET', '/audit/export')).text);
    expect(rows.length).toBe(written);
    expect((await call(fresh.url, 'GET', '/agents/bot')).body.ledger_records).toBe(written);
  }, 60_000);

  it('refuses to start a node configured with other partitions than the cluster', async () => {
    const dir = tempDir('vigil-cluster-');
    dirs.push(dir);
    const refused = startServer({ ...env('node-c'), VIGIL_PARTITIONS: '16' }, dir);
    await expect(refused).rejects.toBeInstanceOf(StartError);
    await expect(refused).rejects.toThrow(/VIGIL_PARTITIONS/);
  }, 30_000);
});
