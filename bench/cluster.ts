/**
 * Cluster mode beside embedded mode, in the same run (issue 15): three local nats-servers (a
 * JetStream cluster, replicas 3), two Vigil nodes, durable ingest with the load split over both
 * nodes against one embedded Vigil (sync) taking the whole load, interleaved round by round; then
 * the replication lag of public reads (written on one node, read on the other) and the failover
 * time (kill -9 of the org's owner, until the other node acknowledges a write again). The load
 * starts once the partitions are shared out between the nodes: it measures the steady cluster.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { Registry } from '../src/services/registry.js';
import { KvRegistryStore } from '../src/nats/kv-registry-store.js';
import { partitionOf } from '../src/nats/partition.js';
import { PUBLIC_FLUSH_MS } from '../src/nats/public-publisher.js';
import { natsServerBin, startNats, type NatsServers } from '../test/support/nats.js';
import { runLoad, type LoadResult } from './load.js';
import { mean, median, profileFlags, startVigil, BENCH_AGENT, BENCH_EVENT, BENCH_KEY, BENCH_ORG, type MacroOptions } from './macro.js';
import { startProcess, VIGIL_READY, type StartedProcess } from './peers.js';

export interface ClusterResult {
  /** Durable ingest, load on both nodes (connections split), mean req/s over the rounds. */
  clusterRps: number;
  clusterP99: number;
  clusterErrors: number;
  /** The embedded sync server under the same total load, same rounds. */
  embeddedRps: number;
  embeddedP99: number;
  ratio: number;
  /**
   * Public-read lag: from a write acknowledged on one node until the other node's public record
   * shows it, for lone writes (see publicLag): the owner's replica and projection taking the
   * batch, its puts to vigil_public and the reader's watch of that bucket. A write within 250 ms
   * (PUBLIC_FLUSH_MS) of the org's last flush waits up to that much more. Median and p99.
   */
  lagMedianMs: number;
  lagP99Ms: number;
  lagSamples: number;
  /** kill -9 of the owner until the other node acknowledged a write, with the default 5 s lease. */
  failoverMs: number;
  leaseSeconds: number;
}

const LEASE_SECONDS = 5;
export const PARTITIONS = 64;

export async function runCluster(options: MacroOptions): Promise<ClusterResult | null> {
  if (natsServerBin() === null) {
    options.log('cluster: no nats-server on PATH (Debian: apt-get install nats-server); skipped');
    return null;
  }
  const nats = await startNats({ nodes: 3 });
  const dirs: string[] = [];
  const nodes: StartedProcess[] = [];
  const embedded = await startVigil('sync');
  try {
    await seedRegistry(nats.urls, [[BENCH_ORG, BENCH_KEY]]);
    for (const name of ['bench-1', 'bench-2']) {
      const dir = mkdtempSync(join(tmpdir(), `vigil-bench-${name}-`));
      dirs.push(dir);
      nodes.push(await startNode(name, dir, nats));
    }
    const urls = nodes.map((n) => `http://127.0.0.1:${n.port}`);
    await balanced(urls, PARTITIONS);
    await seedAgent(urls);

    const cluster: LoadResult[] = [];
    const single: LoadResult[] = [];
    const half = Math.max(1, Math.floor(options.connections / 2));
    for (let round = 1; round <= options.rounds; round++) {
      const both = await Promise.all(urls.map((url) => ingest(url, half, options)));
      const merged: LoadResult = { ...both[0]!, rps: both[0]!.rps + both[1]!.rps, p99: Math.max(both[0]!.p99, both[1]!.p99), errors: both[0]!.errors + both[1]!.errors, requests: both[0]!.requests + both[1]!.requests };
      cluster.push(merged);
      options.log(`round ${round}/${options.rounds}  POST /events/ cluster (2 nodes × ${half} conns) ${Math.round(merged.rps).toString().padStart(7)} req/s  p99 ${merged.p99} ms  errors ${merged.errors}`);
      const one = await ingest(embedded.url, half * 2, options);
      single.push(one);
      options.log(`round ${round}/${options.rounds}  POST /events/ embedded (sync, ${half * 2} conns)  ${Math.round(one.rps).toString().padStart(7)} req/s  p99 ${one.p99} ms  errors ${one.errors}`);
    }
    const lags = await publicLag(urls, options.rounds === 1 ? 20 : 60);
    const failoverMs = await failover(urls, nodes);
    const clusterRps = Math.round(mean(cluster.map((r) => r.rps)));
    const embeddedRps = Math.round(mean(single.map((r) => r.rps)));
    return {
      clusterRps,
      clusterP99: median(cluster.map((r) => r.p99)),
      clusterErrors: cluster.reduce((n, r) => n + r.errors, 0),
      embeddedRps,
      embeddedP99: median(single.map((r) => r.p99)),
      ratio: Math.round((clusterRps / embeddedRps) * 100) / 100,
      lagMedianMs: median(lags),
      lagP99Ms: percentile(lags, 0.99),
      lagSamples: lags.length,
      failoverMs,
      leaseSeconds: LEASE_SECONDS,
    };
  } finally {
    await Promise.allSettled([...nodes.map((n) => n.stop()), embedded.proc.stop()]);
    await nats.stop();
    for (const dir of [...dirs, embedded.dir]) rmSync(dir, { recursive: true, force: true });
  }
}

/** Orgs and their keys in the cluster's KV registry, on the scale plan (the load passes the free quota). */
export async function seedRegistry(servers: string[], orgs: readonly (readonly [org: string, key: string])[]): Promise<void> {
  const nc = await connect({ servers });
  try {
    const store = await KvRegistryStore.open(nc, { replicas: 3 });
    try {
      const registry = new Registry(store);
      for (const [org, key] of orgs) {
        await registry.ensureKey(org, key, 'bench');
        await registry.setPlan(org, 'scale');
      }
    } finally {
      await store.close();
    }
  } finally {
    await nc.close();
  }
}

/** A Vigil cluster node on the bench's 64 partitions and 5 s lease. */
export function startNode(name: string, dir: string, nats: NatsServers): Promise<StartedProcess> {
  return startProcess(
    `vigil-${name}`,
    [...profileFlags(), '--import', 'tsx', 'src/main.ts', 'serve'],
    {
      VIGIL_PORT: '0',
      VIGIL_DATA_DIR: dir,
      VIGIL_NATS_URL: nats.urls.join(','),
      VIGIL_NATS_REPLICAS: '3',
      VIGIL_NODE_ID: name,
      VIGIL_PARTITIONS: String(PARTITIONS),
      VIGIL_LEASE_SECONDS: String(LEASE_SECONDS),
      VIGIL_PUBLIC_RATE_LIMIT: '1000000000',
    },
    VIGIL_READY,
  );
}

const headers = { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json' };

/**
 * Waits until the partitions are shared out (none unowned, no node above its fair share): a node's
 * joining moves partitions from the others, and the load measures the steady cluster, not that.
 */
export async function balanced(urls: string[], partitions: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const owned = await partitionsOwned(urls);
    if (isBalanced(owned, partitions)) return;
    if (Date.now() > deadline) throw new Error(`cluster bench: partitions not shared out within 60 s (owned: ${owned.join(', ')})`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** How many partitions each node says it owns (`/health`), in node order. */
export async function partitionsOwned(urls: string[]): Promise<number[]> {
  return Promise.all(urls.map(async (url) => ((await (await fetch(`${url}/health`)).json()) as { partitions_owned: number[] }).partitions_owned.length));
}

/**
 * Every partition owned and no node above ceil(partitions / nodes), the share each node keeps
 * (src/nats/lease-plan.ts): 32 + 32 of 64 on two nodes, 22 + 22 + 20 (in some order) on three.
 */
export function isBalanced(owned: number[], partitions: number): boolean {
  const share = Math.ceil(partitions / Math.max(1, owned.length));
  return owned.reduce((a, b) => a + b, 0) === partitions && owned.every((n) => n <= share);
}

/** Registers the public bench agent through the first node, once some node owns its partition. */
async function seedAgent(urls: string[]): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await fetch(`${urls[0]}/agents/`, { method: 'POST', headers, body: JSON.stringify({ agent_id: BENCH_AGENT, name: 'Bench Agent' }) });
    if (res.status === 201) break;
    if (Date.now() > deadline) throw new Error(`cluster bench: registering the agent: ${res.status} ${await res.text()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const patch = await fetch(`${urls[0]}/admin/agents/${BENCH_AGENT}`, { method: 'PATCH', headers, body: JSON.stringify({ public: true }) });
  if (!patch.ok) throw new Error(`cluster bench: publishing the agent: ${patch.status} ${await patch.text()}`);
}

function ingest(url: string, connections: number, options: MacroOptions): Promise<LoadResult> {
  const spec = { url: `${url}/events/`, method: 'POST' as const, headers, body: BENCH_EVENT, connections };
  return (options.warmupSeconds > 0 ? runLoad({ ...spec, durationSec: options.warmupSeconds }) : Promise.resolve()).then(() => runLoad({ ...spec, durationSec: options.seconds }));
}

/**
 * Writes on one node, then polls the other's public record until it shows the write; ms each.
 * Half the writes go through the owner, half are forwarded to it; the reads never are (they
 * answer from the reader's mirror of what the owner published).
 */
async function publicLag(urls: string[], samples: number): Promise<number[]> {
  const lags: number[] = [];
  for (let i = 0; i < samples; i++) {
    const [writer, reader] = i % 2 === 0 ? [urls[0]!, urls[1]!] : [urls[1]!, urls[0]!];
    // Past the owner's coalescing interval since the last flush: each write is a lone one, so the
    // figure is the publishing path's own lag (back to back, every write would wait out the
    // interval the previous one started, and the figure would be the interval).
    await new Promise((resolve) => setTimeout(resolve, PUBLIC_FLUSH_MS + 50));
    const res = await fetch(`${writer}/events/`, { method: 'POST', headers, body: BENCH_EVENT });
    if (res.status !== 200) continue;
    const acked = performance.now();
    // The agent's own read on the writer gives the count the public record must reach.
    const want = ((await (await fetch(`${writer}/agents/${BENCH_AGENT}`, { headers })).json()) as { ledger_records: number }).ledger_records;
    for (;;) {
      const seen = (await (await fetch(`${reader}/public/agents/${BENCH_ORG}/${BENCH_AGENT}`)).json()) as { ledger_records?: number };
      if ((seen.ledger_records ?? 0) >= want) break;
      if (performance.now() - acked > 10_000) throw new Error('cluster bench: a public read trailed by over 10 s');
    }
    lags.push(Math.round((performance.now() - acked) * 100) / 100);
  }
  return lags;
}

/** kill -9 of the node owning the bench org; ms until the other node acknowledges a write. */
async function failover(urls: string[], nodes: StartedProcess[]): Promise<number> {
  const partition = partitionOf(BENCH_ORG, PARTITIONS);
  const owned = await Promise.all(urls.map(async (url) => ((await (await fetch(`${url}/health`)).json()) as { partitions_owned: number[] }).partitions_owned));
  const owner = owned.findIndex((list) => list.includes(partition));
  if (owner === -1) throw new Error('cluster bench: no node owns the bench org');
  const survivor = urls[1 - owner]!;
  process.kill(nodes[owner]!.pid, 'SIGKILL');
  const killed = performance.now();
  for (;;) {
    const res = await fetch(`${survivor}/events/`, { method: 'POST', headers, body: BENCH_EVENT, signal: AbortSignal.timeout(15_000) }).catch(() => null);
    if (res?.status === 200) return Math.round(performance.now() - killed);
    if (performance.now() - killed > 60_000) throw new Error('cluster bench: no failover within 60 s');
  }
}

function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
}
