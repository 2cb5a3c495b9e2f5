import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { ensureClusterLogKey, ensureClusterLogOrigin, LogKeyDiffersError } from '../../src/nats/cluster-log-key.js';
import { defaultReplicas, ensureClusterSettings, PartitionsDifferError } from '../../src/nats/cluster-settings.js';
import { rawPublicKey } from '../../src/domain/signed-note.js';
import { PartitionLeases, type OwnershipChange, type PartitionLeasesOptions } from '../../src/nats/partition-leases.js';
import { captureLogger, type LogLine } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';
import { ROOT } from '../support/server.js';

/**
 * PartitionLeases (DESIGN §8) against real nats-servers: each "node" is a PartitionLeases on its
 * own connection. Short leases (1 s, 2 s on the 3-node cluster) keep the cases quick; bounds on
 * time are generous (this is about function, not speed). A guard samples every few ms, and at
 * every gain, that no two nodes own one partition at the same instant.
 */
const run = natsAvailable('PartitionLeases behaviour') ? describe : describe.skip;

interface Node {
  leases: PartitionLeases;
  nc: NatsConnection;
  changes: OwnershipChange[];
  /** Its log (unless the case passed its own), shown when a wait fails. */
  lines: LogLine[];
}

let buckets = 0;
const opened: Node[] = [];

async function openNode(servers: string[], options: Partial<PartitionLeasesOptions> & { bucket: string }): Promise<Node> {
  const nc = await connect({ servers, noRandomize: true, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
  const lines: LogLine[] = [];
  const leases = await PartitionLeases.open(nc, { node: 'test-node', partitions: 8, leaseSeconds: 1, replicas: 1, log: captureLogger(lines), ...options });
  const node = { leases, nc, changes: [] as OwnershipChange[], lines };
  leases.onChange((change) => node.changes.push(change));
  opened.push(node);
  return node;
}

async function closeAll(): Promise<void> {
  for (const { leases, nc } of opened.splice(0)) {
    await leases.close();
    if (!nc.isClosed()) await nc.close();
  }
}

/** Polls `condition` every 10 ms; resolves with the ms it took, rejects after `timeoutMs` saying what each node owns and logged last. */
async function until(what: string, condition: () => boolean, timeoutMs: number): Promise<number> {
  const began = Date.now();
  while (!condition()) {
    if (Date.now() - began > timeoutMs) {
      const nodes = opened.map((n) => `${n.leases.holder} owns [${n.leases.owned().join(', ')}]; its last log lines:\n${n.lines.slice(-12).map((l) => `  ${JSON.stringify(l)}`).join('\n')}`);
      throw new Error(`not within ${timeoutMs} ms: ${what}\n${nodes.join('\n')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return Date.now() - began;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const all = (partitions: number): number[] => Array.from({ length: partitions }, (_, p) => p);
const union = (...nodes: Node[]): number[] => [...new Set(nodes.flatMap((n) => n.leases.owned()))].sort((a, b) => a - b);

/** Every node's share is within one of the others', and together they own all `partitions`. */
function balanced(nodes: Node[], partitions: number): boolean {
  const counts = nodes.map((n) => n.leases.owned().length);
  return counts.reduce((a, b) => a + b, 0) === partitions && Math.max(...counts) - Math.min(...counts) <= 1 && union(...nodes).length === partitions;
}

/** Records every instant (sampled every 5 ms, and at each gain) at which two nodes own one partition. */
function overlapGuard(nodes: Node[], partitions: number): { violations: string[]; stop: () => string[] } {
  const violations: string[] = [];
  const check = (when: string): void => {
    for (let p = 0; p < partitions; p++) {
      const owners = nodes.filter((n) => n.leases.owns(p));
      if (owners.length > 1) violations.push(`${when}: partition ${p} owned by ${owners.map((o) => o.leases.holder).join(' and ')}`);
    }
  };
  const timer = setInterval(() => check('sample'), 5);
  const offs = nodes.map((n) => n.leases.onChange(({ gained }) => gained.length > 0 && check('at a gain')));
  return {
    violations,
    stop: () => {
      clearInterval(timer);
      for (const off of offs) off();
      return violations;
    },
  };
}

/** A PartitionLeases in its own process (test/support/lease-holder.ts), to be stopped with SIGSTOP. */
interface Holder {
  child: ChildProcess;
  /** Its stdout, parsed: log lines (`msg`) and its own (`t`). */
  lines: Record<string, any>[];
  onLine: (listener: (line: Record<string, any>) => void) => void;
  owned: () => Promise<number[]>;
  close: () => Promise<void>;
}

async function spawnHolder(url: string, bucket: string, partitions: number, leaseSeconds: number): Promise<Holder> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/lease-holder.ts', url, bucket, String(partitions), String(leaseSeconds)], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const lines: Record<string, any>[] = [];
  const listeners: ((line: Record<string, any>) => void)[] = [];
  createInterface({ input: child.stdout }).on('line', (text) => {
    let line: Record<string, any>;
    try {
      line = JSON.parse(text) as Record<string, any>;
    } catch {
      line = { text };
    }
    lines.push(line);
    for (const listener of listeners) listener(line);
  });
  const next = (t: string): Promise<Record<string, any>> => new Promise((resolve) => listeners.push((line) => line.t === t && resolve(line)));
  const ready = next('ready');
  await Promise.race([ready, exited.then(() => Promise.reject(new Error('lease holder exited before it was ready')))]);
  return {
    child,
    lines,
    onLine: (listener) => listeners.push(listener),
    owned: async () => {
      const answer = next('owned');
      child.stdin.write('owned\n');
      return (await answer).owned as number[];
    },
    close: async () => {
      child.stdin.write('close\n');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

run('PartitionLeases on one nats-server', () => {
  let servers: NatsServers | undefined;
  let urls: string[];
  beforeAll(async () => {
    servers = await startNats({ nodes: 1 });
    urls = servers.urls;
  });
  afterEach(closeAll);
  afterAll(async () => {
    await servers?.stop();
  });
  const bucket = (): string => `leases_t${++buckets}`;

  it('lets one node take every partition: owned() and owns() agree, onChange reports the gains, the KV names the holder', async () => {
    const a = await openNode(urls, { bucket: bucket(), node: 'alpha', leaseSeconds: 2 });
    expect(a.leases.holder).toMatch(/^alpha:[0-9a-f]{12}$/);
    expect(a.leases.owned()).toEqual([]);
    a.leases.start();
    await until('alpha owns all 8', () => a.leases.owned().length === 8, 5_000);
    expect(a.leases.owned()).toEqual(all(8));
    for (const p of all(8)) expect(a.leases.owns(p)).toBe(true);
    expect(a.leases.owns(8)).toBe(false);
    expect(a.changes.flatMap((c) => c.gained).sort((x, y) => x - y)).toEqual(all(8));
    expect(a.changes.flatMap((c) => c.lost)).toEqual([]);
    const kv = await new Kvm(a.nc).open(`leases_t${buckets}`);
    const stored = (await kv.get('partition.3'))!.json<{ holder: string; node: string; at: string }>();
    expect(stored).toMatchObject({ holder: a.leases.holder, node: 'alpha' });
    // Renewals keep it owned, with no further changes.
    const changes = a.changes.length;
    await sleep(2_500);
    expect(a.leases.owned()).toEqual(all(8));
    expect(a.changes.length).toBe(changes);
  });

  it('shares partitions between two nodes (half each, within one), never owned by both at once, all owned', async () => {
    const name = bucket();
    const [a, b] = await Promise.all([openNode(urls, { bucket: name, partitions: 9, leaseSeconds: 2 }), openNode(urls, { bucket: name, partitions: 9, leaseSeconds: 2 })]);
    const guard = overlapGuard([a, b], 9);
    a.leases.start();
    b.leases.start();
    await until('two nodes share 9 partitions 5/4', () => balanced([a, b], 9), 8_000);
    await sleep(2_000); // and it stays so
    expect(balanced([a, b], 9)).toBe(true);
    expect(guard.stop()).toEqual([]);
  });

  it('gives everything to the other node within a few lease periods when a node closes', async () => {
    const name = bucket();
    const a = await openNode(urls, { bucket: name });
    const b = await openNode(urls, { bucket: name });
    const guard = overlapGuard([a, b], 8);
    a.leases.start();
    b.leases.start();
    await until('balanced', () => balanced([a, b], 8), 8_000);
    const aHad = a.leases.owned();
    await a.leases.close();
    expect(a.leases.owned()).toEqual([]);
    expect(a.changes.at(-1)).toEqual({ gained: [], lost: aHad });
    const took = await until('b owns all 8', () => b.leases.owned().length === 8, 4_000);
    expect(took).toBeLessThan(4_000); // 4 lease periods; a released, so it is about one round
    expect(guard.stop()).toEqual([]);
  });

  it('takes a dead node\'s partitions once its leases expire; the dead one stops owning first (connection cut, nothing released)', async () => {
    const name = bucket();
    const a = await openNode(urls, { bucket: name });
    const b = await openNode(urls, { bucket: name });
    const guard = overlapGuard([a, b], 8);
    a.leases.start();
    b.leases.start();
    await until('balanced', () => balanced([a, b], 8), 8_000);
    const aHad = a.leases.owned();
    const before = a.changes.length;
    const cut = Date.now();
    await a.nc.close(); // as if its NATS were unreachable: renewals fail, nothing is released
    await until('a owns nothing', () => a.leases.owned().length === 0, 2_000);
    expect(Date.now() - cut).toBeLessThan(1_000); // local validity ends within 3/4 of a lease of the last renewal
    // Told by the expiry timer, which may fire a few ms after the clock passed the validity.
    const lostSinceCut = (): number[] => a.changes.slice(before).flatMap((c) => c.lost).sort((x, y) => x - y);
    await until('a is told it lost them', () => lostSinceCut().length === aHad.length, 1_000);
    expect(lostSinceCut()).toEqual(aHad);
    await until('b owns all 8', () => b.leases.owned().length === 8, 4_000);
    expect(Date.now() - cut).toBeLessThan(4_000);
    expect(guard.stop()).toEqual([]);
  });

  it('a frozen holder (as under SIGSTOP) stops owning before its leases can expire; thawed, its renewals are refused and it takes nothing held elsewhere', async () => {
    const name = bucket();
    const lines: LogLine[] = [];
    const a = await openNode(urls, { bucket: name, log: captureLogger(lines) });
    const b = await openNode(urls, { bucket: name });
    const guard = overlapGuard([a, b], 8);
    // At each of b's gains, a must already have given that partition up on its own clock.
    const early: number[] = [];
    b.leases.onChange(({ gained }) => early.push(...gained.filter((p) => a.leases.owns(p))));
    a.leases.start();
    b.leases.start();
    await until('balanced', () => balanced([a, b], 8), 8_000);
    const aHad = a.leases.owned();
    a.leases.freezeForTests();
    await until('a owns nothing (its own clock)', () => a.leases.owned().length === 0, 1_000);
    await until('b owns all 8', () => b.leases.owned().length === 8, 4_000);
    expect(early).toEqual([]);
    a.leases.thawForTests();
    await until('a learns its renewals are refused', () => lines.some((l) => l.msg.startsWith('lapsed partition leases: renewal refused')), 2_000);
    const refusedLine = lines.find((l) => l.msg.startsWith('lapsed partition leases: renewal refused'))!;
    expect(refusedLine.fields?.partitions).toEqual(aHad);
    // Then the fair share brings half back to a, through b's releases, never overlapping.
    await until('balanced again', () => balanced([a, b], 8), 8_000);
    expect(guard.stop()).toEqual([]);
  });

  it('a process stopped with SIGSTOP past its leases owns nothing once resumed (lost before its renewals are answered); they are refused; it takes nothing held elsewhere', async () => {
    const name = bucket();
    const b = await openNode(urls, { bucket: name });
    const holder = await spawnHolder(urls[0]!, name, 8, 1);
    try {
      b.leases.start();
      let childOwned: number[] = [];
      const shared = async (): Promise<boolean> => {
        childOwned = await holder.owned();
        return childOwned.length === 4 && b.leases.owned().length === 4 && new Set([...childOwned, ...b.leases.owned()]).size === 8;
      };
      for (const deadline = Date.now() + 8_000; !(await shared()); await sleep(50)) {
        if (Date.now() > deadline) throw new Error(`not balanced: child ${JSON.stringify(childOwned)}, b ${JSON.stringify(b.leases.owned())}`);
      }
      const childHad = childOwned;
      holder.child.kill('SIGSTOP');
      await until('b owns all 8 while the holder is stopped', () => b.leases.owned().length === 8, 4_000);
      const mark = holder.lines.length;
      const overlaps: number[] = [];
      holder.onLine((line) => line.t === 'change' && overlaps.push(...(line.gained as number[]).filter((p) => b.leases.owns(p))));
      holder.child.kill('SIGCONT');
      expect(await holder.owned()).toEqual([]);
      await until('its renewals are refused', () => holder.lines.some((l) => l.msg?.startsWith('lapsed partition leases: renewal refused')), 2_000);
      const after = holder.lines.slice(mark);
      expect(after.find((l) => l.msg?.startsWith('lapsed partition leases: renewal refused'))!.partitions).toEqual(childHad);
      const firstChange = after.findIndex((l) => l.t === 'change');
      expect(after[firstChange]).toEqual({ t: 'change', gained: [], lost: childHad });
      expect(firstChange).toBeLessThan(after.findIndex((l) => l.msg?.startsWith('lapsed partition leases: renewal refused')));
      for (const deadline = Date.now() + 8_000; !(await shared()); await sleep(50)) {
        if (Date.now() > deadline) throw new Error(`not balanced again: child ${JSON.stringify(childOwned)}, b ${JSON.stringify(b.leases.owned())}`);
      }
      expect(overlaps).toEqual([]);
    } finally {
      holder.child.kill('SIGCONT');
      await holder.close();
    }
  });

  it('makes a restarted process with the same node name a new holder: it owns nothing of its previous process until those leases expire', async () => {
    const name = bucket();
    const first = await openNode(urls, { bucket: name, node: 'alpha' });
    first.leases.start();
    await until('the first process owns all 8', () => first.leases.owned().length === 8, 5_000);
    await first.nc.close(); // died without releasing
    const second = await openNode(urls, { bucket: name, node: 'alpha' });
    expect(second.leases.holder).not.toBe(first.leases.holder);
    const guard = overlapGuard([first, second], 8);
    const started = Date.now();
    let firstGain = 0;
    second.leases.onChange(({ gained }) => gained.length > 0 && firstGain === 0 && (firstGain = Date.now() - started));
    second.leases.start();
    await sleep(300);
    expect(second.leases.owned()).toEqual([]); // the old leases are not its own
    await until('the new process owns all 8', () => second.leases.owned().length === 8, 4_000);
    expect(firstGain).toBeGreaterThan(300);
    expect(guard.stop()).toEqual([]);
  });

  it('hands partitions over promptly with release(), back and forth', async () => {
    const name = bucket();
    const a = await openNode(urls, { bucket: name, partitions: 3 });
    const b = await openNode(urls, { bucket: name, partitions: 3 });
    const guard = overlapGuard([a, b], 3);
    a.leases.start();
    b.leases.start();
    await until('balanced 2/1', () => balanced([a, b], 3), 8_000);
    let [from, to] = a.leases.owned().length === 2 ? [a, b] : [b, a];
    const p = from.leases.owned()[0]!;
    for (let i = 0; i < 3; i++) {
      await from.leases.release([p]);
      expect(from.leases.owns(p)).toBe(false);
      const took = await until(`the other node takes partition ${p}`, () => to.leases.owns(p), 3_000);
      expect(took).toBeLessThan(3_000);
      [from, to] = [to, from];
    }
    expect(guard.stop()).toEqual([]);
  });

  it('ensureClusterSettings: the first node stores the partition count, the same passes, another is refused', async () => {
    const nc = await connect({ servers: urls });
    try {
      expect(defaultReplicas(nc)).toBe(1);
      const bucketName = `cluster_t${++buckets}`;
      await ensureClusterSettings(nc, { partitions: 16, replicas: 1, bucket: bucketName });
      const kv = await new Kvm(nc).open(bucketName);
      expect((await kv.get('partitions'))!.string()).toBe('16');
      await ensureClusterSettings(nc, { partitions: 16, replicas: 1, bucket: bucketName });
      const refused = ensureClusterSettings(nc, { partitions: 32, replicas: 1, bucket: bucketName });
      await expect(refused).rejects.toThrow(PartitionsDifferError);
      await expect(refused).rejects.toThrow("VIGIL_PARTITIONS (32) differs from the cluster's value 16");
      // Nodes starting together with different counts: exactly one count wins, the other is refused.
      const race = `cluster_t${++buckets}`;
      const outcomes = await Promise.allSettled([8, 64].map((partitions) => ensureClusterSettings(nc, { partitions, replicas: 1, bucket: race })));
      expect(outcomes.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
    } finally {
      await nc.close();
    }
  });

  it('ensureClusterLogKey: nodes without VIGIL_LOG_KEY share the one the first made; a different VIGIL_LOG_KEY is refused, the same passes', async () => {
    const nc = await connect({ servers: urls });
    try {
      const pub = (key: KeyObject) => rawPublicKey(key).toString('base64');
      const bucket = `cluster_t${++buckets}`;
      // Nodes starting together: one key wins, every node signs with it.
      const keys = await Promise.all([1, 2, 3].map(() => ensureClusterLogKey(nc, null, { replicas: 1, bucket })));
      expect(new Set(keys.map(pub)).size).toBe(1);
      const refused = ensureClusterLogKey(nc, generateKeyPairSync('ed25519').privateKey, { replicas: 1, bucket });
      await expect(refused).rejects.toThrow(LogKeyDiffersError);
      await expect(refused).rejects.toThrow(/VIGIL_LOG_KEY is not the cluster's log key/);
      expect(pub(await ensureClusterLogKey(nc, keys[0]!, { replicas: 1, bucket }))).toBe(pub(keys[0]!));
      // A cluster whose key came from VIGIL_LOG_KEY keeps the private key out of NATS; a node without one is told to set it.
      const own = `cluster_t${++buckets}`;
      const given = generateKeyPairSync('ed25519').privateKey;
      expect(await ensureClusterLogKey(nc, given, { replicas: 1, bucket: own })).toBe(given);
      expect(await (await new Kvm(nc).open(own)).get('log-key')).toBeNull();
      await expect(ensureClusterLogKey(nc, null, { replicas: 1, bucket: own })).rejects.toThrow(/set VIGIL_LOG_KEY to the same key here/);
      // The log's name: the first node's host, whatever the others are reached at.
      const names = await Promise.all(['a.example', 'b.example'].map((host) => ensureClusterLogOrigin(nc, host, { replicas: 1, bucket })));
      expect(names[0]).toBe(names[1]);
      expect(await ensureClusterLogOrigin(nc, 'c.example', { replicas: 1, bucket })).toBe(names[0]);
    } finally {
      await nc.close();
    }
  });
});

run('PartitionLeases on a 3-node nats cluster (R3)', () => {
  let servers: NatsServers | undefined;
  beforeAll(async () => {
    servers = await startNats({ nodes: 3 });
  });
  afterEach(closeAll);
  afterAll(async () => {
    await servers?.stop();
  });

  it('keeps one owner per partition through kill -9 of nats-servers: leases survive a follower\'s death, and are regained after the leader\'s', async () => {
    const urls = servers!.urls;
    const name = `leases_t${++buckets}`;
    const a = await openNode([urls[0]!, urls[1]!, urls[2]!], { bucket: name, leaseSeconds: 2, replicas: 3 });
    const b = await openNode([urls[1]!, urls[2]!, urls[0]!], { bucket: name, leaseSeconds: 2, replicas: 3 });
    expect(defaultReplicas(a.nc)).toBe(3);
    const guard = overlapGuard([a, b], 8);
    a.leases.start();
    b.leases.start();
    await until('balanced', () => balanced([a, b], 8), 10_000);
    const leaderOf = async (): Promise<number> => Number((await (await jetstreamManager(a.nc)).streams.info(`KV_${name}`)).cluster!.leader!.slice(1));

    // A follower (a's own server if it is one): the stream keeps its leader, renewals go on.
    const leader = await leaderOf();
    const follower = leader === 0 ? 1 : 0;
    const lostBefore = [a, b].map((n) => n.changes.flatMap((c) => c.lost).length);
    await servers!.kill(follower);
    await sleep(2_500);
    expect(balanced([a, b], 8)).toBe(true);
    expect([a, b].map((n) => n.changes.flatMap((c) => c.lost).length)).toEqual(lostBefore); // kept throughout
    await servers!.restart(follower);

    // The stream leader: renewals wait for an election (longer than a lease on 2.9.10), so leases may lapse, then are regained.
    const killed = await leaderOf();
    await servers!.kill(killed);
    const elected = Date.now();
    for (;;) {
      const now = await leaderOf().catch(() => killed);
      if (now !== killed) break;
      if (Date.now() - elected > 20_000) throw new Error('no new leader of the lease stream in 20 s');
      await sleep(100);
    }
    await sleep(2_000); // a lease under the new leader: owning after it means renewals (or claims) succeed there
    await until('balanced after the leader was killed', () => balanced([a, b], 8), 10_000);
    expect(guard.stop()).toEqual([]);
  });
});
