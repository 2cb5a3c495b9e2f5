import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { performance } from 'node:perf_hooks';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { hashKey } from '../../src/domain/keys.js';
import { openClusterStores, type ClusterStores } from '../../src/nats/cluster-stores.js';
import { KvMirror } from '../../src/nats/kv-mirror.js';
import { Registry } from '../../src/services/registry.js';
import { captureLogger, silentLogger, type LogLine } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';

/**
 * What the KV stores do across the nodes of a 3-node cluster (R3) beyond their contracts (which
 * test/contract runs on them): how soon another node sees a write, races between nodes, and a
 * watch whose server is killed -9 and restarted.
 */
const run = natsAvailable('KV stores across nodes') ? describe : describe.skip;

let servers: NatsServers | undefined;
const connections: NatsConnection[] = [];
const closing: { close(): Promise<void> }[] = [];

/** A connection to node `i` only (no failover to the others unless `failover`). */
async function nodeConnection(i: number, failover = true): Promise<NatsConnection> {
  const nc = await connect({ servers: servers!.urls[i]!, ignoreClusterUpdates: !failover, maxReconnectAttempts: -1, reconnectTimeWait: 200 });
  connections.push(nc);
  return nc;
}

let suite = 0;
/** Every store of cluster mode on node `i`, over buckets of one test (`names`). */
async function storesOn(i: number, names: string): Promise<ClusterStores> {
  const buckets = { orgs: `${names}_orgs`, keys: `${names}_keys`, scoringKeys: `${names}_sk`, scoringUses: `${names}_su`, studioAgents: `${names}_sa`, checkpoints: `${names}_cp` };
  const stores = await openClusterStores(await nodeConnection(i), { replicas: 3, log: silentLogger(), buckets });
  closing.push(stores);
  return stores;
}

/** Retries `write` while the cluster cannot answer (a node down, a leader being elected). */
async function retrying<T>(write: () => Promise<T>): Promise<T> {
  for (const deadline = Date.now() + 20_000; ; ) {
    try {
      return await write();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

run('KV stores on a 3-node cluster (R3)', () => {
  beforeAll(async () => {
    servers = await startNats({ nodes: 3 });
  });
  afterAll(async () => {
    for (const c of closing.splice(0)) await c.close();
    for (const nc of connections.splice(0)) await nc.close();
    await servers?.stop();
  });

  it('shows a key created on one node to another within milliseconds, and a plan change too', async () => {
    const names = `vis${++suite}`;
    const [a, b] = [await storesOn(0, names), await storesOn(1, names)];
    const [here, there] = [new Registry(a.registry), new Registry(b.registry)];
    await here.ensureOrg('acme');
    const afterAck: number[] = [];
    const afterCall: number[] = [];
    for (let i = 0; i < 40; i++) {
      const called = performance.now();
      const created = await here.createKey('acme', ['events:write'], `k${i}`);
      const acked = performance.now();
      const hash = hashKey(created.key);
      for (const deadline = acked + 5000; b.registry.getKey(hash) === undefined; ) {
        if (performance.now() > deadline) throw new Error(`key ${i} not seen on node 1 in 5 s`);
        await new Promise((resolve) => setImmediate(resolve));
      }
      const seen = performance.now();
      afterAck.push(seen - acked);
      afterCall.push(seen - called);
      expect(there.authenticate(`Bearer ${created.key}`).id).toBe(created.id);
    }
    console.log(
      `[kv] cross-node visibility of a new key (40 keys, R3, node 0 → node 1): after the writer's ack median ${median(afterAck).toFixed(2)} ms, max ${Math.max(...afterAck).toFixed(2)} ms; ` +
        `from the write's start median ${median(afterCall).toFixed(2)} ms, max ${Math.max(...afterCall).toFixed(2)} ms`,
    );
    await here.setPlan('acme', 'scale', 'ap@acme.example');
    await expect.poll(() => there.planOf('acme').name, { timeout: 5000, interval: 5 }).toBe('scale');
    expect(there.getOrg('acme')?.billing_email).toBe('ap@acme.example');
    await there.setPlan('acme', 'free');
    await expect.poll(() => here.planOf('acme').name, { timeout: 5000, interval: 5 }).toBe('free');
  });

  it('opens a new bucket that three nodes create at once, each through its own server (the old code failed its first try: "stream not found" or no answer)', async () => {
    const ncs = [await nodeConnection(0), await nodeConnection(1), await nodeConnection(2)];
    for (let i = 0; i < 3; i++) {
      const bucket = `race${++suite}_${i}`;
      const opened = await Promise.all(ncs.map((nc) => KvMirror.open<{ n: number }>(nc, { bucket, replicas: 3, log: silentLogger() })));
      closing.push(...opened);
      expect(await opened[0]!.create('k', { n: i })).toMatchObject({ ok: true });
      await expect.poll(() => opened.map((m) => m.get('k')?.n), { timeout: 5000 }).toEqual([i, i, i]);
    }
  }, 60_000);

  it('gives the last sandbox request of a key to exactly one of two nodes using it at once', async () => {
    const names = `use${++suite}`;
    const [a, b] = [await storesOn(0, names), await storesOn(2, names)];
    for (let i = 0; i < 10; i++) {
      const record = { hash: hashKey(`vsk_last${i}`), email: `last${i}@example.com`, limit: 2, used: 0, created_at: new Date().toISOString() };
      expect(await a.scoringKeys.issue(record)).toEqual({ ok: true });
      expect(await a.scoringKeys.use(record.hash)).toEqual({ ok: true, used: 1, remaining: 1 });
      await expect.poll(() => b.scoringKeys.get(record.hash)?.used, { timeout: 5000, interval: 5 }).toBe(1);
      const outcomes = await Promise.all([a.scoringKeys.use(record.hash), b.scoringKeys.use(record.hash)]);
      expect(outcomes.filter((o) => o.ok), `key ${i}`).toEqual([{ ok: true, used: 2, remaining: 0 }]);
      expect(outcomes.filter((o) => !o.ok), `key ${i}`).toEqual([{ ok: false, reason: 'exhausted' }]);
    }
  });

  it('issues one sandbox key for an address that two nodes are asked for at once', async () => {
    const names = `iss${++suite}`;
    const [a, b] = [await storesOn(1, names), await storesOn(2, names)];
    for (let i = 0; i < 10; i++) {
      const email = `both${i}@example.com`;
      const key = (text: string) => ({ hash: hashKey(text), email, limit: 100, used: 0, created_at: new Date().toISOString() });
      const outcomes = await Promise.all([a.scoringKeys.issue(key(`vsk_a${i}`)), b.scoringKeys.issue(key(`vsk_b${i}`))]);
      expect(outcomes.filter((o) => o.ok), email).toHaveLength(1);
      expect(outcomes.filter((o) => !o.ok && o.reason === 'email_taken'), email).toHaveLength(1);
      const winner = outcomes[0].ok ? `vsk_a${i}` : `vsk_b${i}`;
      await expect.poll(() => [a.scoringKeys.get(hashKey(winner))?.email, b.scoringKeys.get(hashKey(winner))?.email], { timeout: 5000 }).toEqual([email, email]);
    }
  });

  it('keeps on the checkpoint board the largest checkpoint two nodes offered at once, never a smaller one after', async () => {
    const names = `cpb${++suite}`;
    const [a, b] = [await storesOn(1, names), await storesOn(2, names)];
    const note = (size: number): string => `vigil.example/vigil/acme\n${size}\n…\n`;
    // What each node is told of the board's changes, as its LogCheckpoints judges them (one org's name needs a KV token).
    const told = { a: new Map<string, number>(), b: new Map<string, number>() };
    a.checkpoints.watch((org, checkpoint) => told.a.set(org, Math.max(told.a.get(org) ?? 0, checkpoint.size)));
    b.checkpoints.watch((org, checkpoint) => told.b.set(org, Math.max(told.b.get(org) ?? 0, checkpoint.size)));
    for (let round = 0; round < 5; round++) {
      const org = round === 4 ? 'org four.é' : `org${round}`;
      // Interleaved offers from both nodes, each node's in rising order (as it signs them).
      for (let size = 1; size <= 30; size++) (size % 2 === round % 2 ? a : b).checkpoints.offer(org, { size, note: note(size) });
      await Promise.all([a.checkpoints.settled(), b.checkpoints.settled()]);
      await expect.poll(() => [a.checkpoints.get(org)?.size, b.checkpoints.get(org)?.size], { timeout: 5000 }).toEqual([30, 30]);
      expect(b.checkpoints.get(org)?.note).toBe(note(30));
      await expect.poll(() => [told.a.get(org), told.b.get(org)], { timeout: 5000 }).toEqual([30, 30]);
      a.checkpoints.offer(org, { size: 12, note: note(12) });
      await a.checkpoints.settled();
      expect(a.checkpoints.get(org)?.size).toBe(30);
    }
  });

  it('keeps a watch whose only server is killed -9 and restarted: the puts and deletes made meanwhile arrive', async () => {
    const bucket = `survive${++suite}`;
    // The writer never uses node 0; the mirror uses nothing else, so it is cut off while node 0 is down.
    const writer = await KvMirror.open<number>(await connect({ servers: [servers!.urls[1]!, servers!.urls[2]!], ignoreClusterUpdates: true }).then((nc) => (connections.push(nc), nc)), { bucket, replicas: 3, timeoutMs: 1000 });
    closing.push(writer);
    const lines: LogLine[] = [];
    const mirror = await KvMirror.open<number>(await nodeConnection(0, false), { bucket, replicas: 3, log: captureLogger(lines) });
    closing.push(mirror);
    await writer.put('kept', 1);
    await writer.put('gone', 1);
    await expect.poll(() => [mirror.get('kept'), mirror.get('gone')], { timeout: 5000 }).toEqual([1, 1]);

    await servers!.kill(0);
    for (let i = 0; i < 10; i++) await retrying(() => writer.put(`during.${i}`, i));
    await retrying(() => writer.put('kept', 2));
    await retrying(() => writer.delete('gone'));
    expect(mirror.get('kept')).toBe(1); // cut off: it still serves what it had
    await servers!.restart(0);
    await retrying(() => writer.put('after', 1));

    const expected = { kept: 2, after: 1, ...Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`during.${i}`, i])) };
    await expect.poll(() => Object.fromEntries(mirror.entries()), { timeout: 15_000 }).toEqual(expected);
    expect(mirror.get('gone')).toBeUndefined();
    expect(lines.map((l) => l.fields?.why)).toContain('reconnect');
    // Its connection is back: it writes, and the writer's node sees it.
    await retrying(() => mirror.put('from-mirror', 7));
    await expect.poll(() => writer.get('from-mirror'), { timeout: 5000 }).toBe(7);
    expect((await (await jetstreamManager(connections[0]!)).streams.info(`KV_${bucket}`)).config.num_replicas).toBe(3);
  });
});

run('KV mirror on one nats-server', () => {
  let single: NatsServers | undefined;
  const mine: NatsConnection[] = [];
  beforeAll(async () => {
    single = await startNats({ nodes: 1 });
  });
  afterAll(async () => {
    for (const nc of mine) await nc.close();
    await single?.stop();
  });

  it('renews its watch after a kill -9 and restart of the server (its consumer died with it), and gets what is written after', async () => {
    const open = async (log = silentLogger()): Promise<KvMirror<string>> => {
      const nc = await connect({ servers: single!.urls, maxReconnectAttempts: -1, reconnectTimeWait: 200 });
      mine.push(nc);
      return KvMirror.open<string>(nc, { bucket: 'single', replicas: 1, log, timeoutMs: 1000 });
    };
    const lines: LogLine[] = [];
    const mirror = await open(captureLogger(lines));
    const writer = await open();
    await writer.put('a', 'before');
    await expect.poll(() => mirror.get('a'), { timeout: 5000 }).toBe('before');
    await single!.kill(0);
    await single!.restart(0);
    await retrying(() => writer.put('a', 'after'));
    await retrying(() => writer.put('b', 'new'));
    await expect.poll(() => [mirror.get('a'), mirror.get('b')], { timeout: 10_000 }).toEqual(['after', 'new']);
    expect(lines.map((l) => l.msg)).toContain('kv watch renews its consumer');
    await mirror.close();
    await writer.close();
  });
});
