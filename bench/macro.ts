/**
 * Macro benchmark, embedded mode over real HTTP on loopback: Vigil against a bare Fastify handler
 * and a bare uWebSockets.js handler, with the same load generator, in the same run, interleaved
 * round by round so drift on a shared machine hits every target alike.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from '../src/services/registry.js';
import { openLmdb } from '../src/store/lmdb.js';
import { runLoad, type LoadResult } from './load.js';
import { startPeer, startProcess, VIGIL_READY, type StartedProcess } from './peers.js';
import type { MacroRow } from './report.js';

export const BENCH_ORG = 'bench';
export const BENCH_KEY = 'vgl_bench-macro-key-0123456789abcdefghijklmnopqr';
export const BENCH_AGENT = 'bench-agent';
export const BENCH_EVENT = JSON.stringify({ agent_id: BENCH_AGENT, event_type: 'output_generated', payload: { content_length: 512 }, dti: 0.1 });

export interface Target {
  name: string;
  url: string;
}

export interface Scenario {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
  targets: Target[];
}

/** The key of tenant org `tenant-<i>` (the many-tenants scenario). */
export const tenantKey = (i: number): string => `vgl_bench-tenant-${String(i).padStart(4, '0')}-0123456789abcdefghijklmnop`;

/**
 * A Vigil process with the bench org seeded (key, scale plan, a public agent, one event), and
 * `tenants` more orgs `tenant-<i>`, each with its key, on the scale plan, with the bench agent.
 * With `VIGIL_BENCH_PROFILE=<dir>` it runs under `--cpu-prof`, writing its profile there on exit.
 */
export async function startVigil(durability: 'sync' | 'process', tenants = 0, options: { transparencyLog?: boolean } = {}): Promise<{ proc: StartedProcess; url: string; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), `vigil-bench-${durability}-`));
  // The load is far past the free plan's monthly quota: every bench org is on the scale plan.
  const store = openLmdb(dir, 'process');
  try {
    const registry = new Registry(store.registry);
    for (const [org, key] of [['bench', BENCH_KEY], ...Array.from({ length: tenants }, (_, i) => [`tenant-${i}`, tenantKey(i)])] as const) {
      await registry.ensureKey(org, key, 'bench');
      await registry.setPlan(org, 'scale');
    }
  } finally {
    await store.close();
  }
  const proc = await startProcess(
    `vigil-${durability}${options.transparencyLog === false ? '-nolog' : ''}`,
    [...profileFlags(), '--import', 'tsx', 'src/main.ts', 'serve'],
    {
      VIGIL_PORT: '0',
      VIGIL_DATA_DIR: dir,
      VIGIL_DURABILITY: durability,
      VIGIL_PUBLIC_RATE_LIMIT: '1000000000',
      VIGIL_BOOTSTRAP_ORG: 'bench',
      VIGIL_BOOTSTRAP_KEY: BENCH_KEY,
      ...(options.transparencyLog === false ? { VIGIL_BENCH_TRANSPARENCY: 'off' } : {}),
    },
    VIGIL_READY,
  );
  const url = `http://127.0.0.1:${proc.port}`;
  const headers = { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json' };
  const post = async (method: string, path: string, body: unknown): Promise<void> => {
    const res = await fetch(url + path, { method, headers, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`bench seed ${method} ${path}: ${res.status} ${await res.text()}`);
  };
  await post('POST', '/agents/', { agent_id: BENCH_AGENT, name: 'Bench Agent' });
  await post('PATCH', `/admin/agents/${BENCH_AGENT}`, { public: true, public_links: [{ kind: 'website', url: 'https://vigil.example/bench' }] });
  await post('POST', '/events/', JSON.parse(BENCH_EVENT));
  for (let i = 0; i < tenants; i++) {
    const res = await fetch(`${url}/agents/`, { method: 'POST', headers: { ...headers, authorization: `Bearer ${tenantKey(i)}` }, body: JSON.stringify({ agent_id: BENCH_AGENT, name: 'Bench Agent' }) });
    if (!res.ok) throw new Error(`bench seed tenant-${i}: ${res.status} ${await res.text()}`);
  }
  return { proc, url, dir };
}

/** Node flags that profile a Vigil process of the bench (VIGIL_BENCH_PROFILE names the directory). */
export function profileFlags(): string[] {
  const dir = process.env.VIGIL_BENCH_PROFILE;
  return dir === undefined || dir === '' ? [] : ['--cpu-prof', `--cpu-prof-dir=${dir}`];
}

export interface MacroOptions {
  rounds: number;
  seconds: number;
  warmupSeconds: number;
  connections: number;
  log: (line: string) => void;
}

export async function runMacro(options: MacroOptions): Promise<MacroRow[]> {
  const fastify = await startPeer('fastify');
  const uws = await startPeer('uws');
  const sync = await startVigil('sync');
  const proc = await startVigil('process');
  // The same server with its Merkle trees not fed: what the transparency log costs ingest.
  const noLog = await startVigil('sync', 0, { transparencyLog: false });
  try {
    const scenarios: Scenario[] = [
      {
        name: 'POST /events/',
        method: 'POST',
        path: '/events/',
        headers: { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json' },
        body: BENCH_EVENT,
        targets: [
          { name: 'fastify', url: fastify.url },
          { name: 'uws', url: uws.url },
          { name: 'vigil (sync)', url: sync.url },
          { name: 'vigil (process)', url: proc.url },
          { name: 'vigil (sync, no log)', url: noLog.url },
        ],
      },
      {
        name: 'GET /public/agents/{org}/{agent}',
        method: 'GET',
        path: `/public/agents/bench/${BENCH_AGENT}`,
        headers: {},
        targets: [
          { name: 'fastify', url: fastify.url },
          { name: 'uws', url: uws.url },
          { name: 'vigil', url: sync.url },
          // The no-log server takes the reads too: the two compared for the log must see the same
          // traffic. Reads on the log's server alone cost its later POSTs about a tenth (0.89x in a
          // two-server A/B with reads on one, 1.0-1.1x with reads on both), and that was charged to the log.
          { name: 'vigil (no log)', url: noLog.url },
        ],
      },
    ];
    return await measure(scenarios, options);
  } finally {
    await Promise.allSettled([fastify.stop(), uws.stop(), sync.proc.stop(), proc.proc.stop(), noLog.proc.stop()]);
    for (const dir of [sync.dir, proc.dir, noLog.dir]) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Runs every scenario against each of its targets, round by round (a warm-up, then the measured
 * run), and folds the rounds into one row per scenario and target: mean req/s, median latencies.
 */
export async function measure(scenarios: Scenario[], options: MacroOptions): Promise<MacroRow[]> {
  const samples = new Map<string, LoadResult[]>();
  const specOf = (scenario: Scenario, target: Target) => ({
    url: target.url + scenario.path,
    method: scenario.method,
    headers: scenario.headers,
    ...(scenario.body === undefined ? {} : { body: scenario.body }),
    connections: options.connections,
  });
  // One longer warm-up of every target first (JIT, caches, LMDB's map), so round 1 is not the
  // first to meet a cold process.
  if (options.warmupSeconds > 0) {
    for (const scenario of scenarios) for (const target of scenario.targets) await runLoad({ ...specOf(scenario, target), durationSec: options.warmupSeconds * 3 });
  }
  for (let round = 1; round <= options.rounds; round++) {
    for (const scenario of scenarios) {
      // The order of the targets alternates round by round, so a drift of the machine over a
      // round (or whatever ran just before) does not always favour the same target.
      const targets = round % 2 === 1 ? scenario.targets : [...scenario.targets].reverse();
      for (const target of targets) {
        const spec = specOf(scenario, target);
        if (options.warmupSeconds > 0) await runLoad({ ...spec, durationSec: options.warmupSeconds });
        const result = await runLoad({ ...spec, durationSec: options.seconds });
        const key = `${scenario.name}\u0000${target.name}`;
        samples.set(key, [...(samples.get(key) ?? []), result]);
        options.log(`round ${round}/${options.rounds}  ${scenario.name.padEnd(34)} ${target.name.padEnd(16)} ${Math.round(result.rps).toString().padStart(7)} req/s  p99 ${result.p99} ms  errors ${result.errors}`);
      }
    }
  }
  const rows: MacroRow[] = [];
  for (const scenario of scenarios) {
    for (const target of scenario.targets) {
      const runs = samples.get(`${scenario.name}\u0000${target.name}`) ?? [];
      rows.push({
        scenario: scenario.name,
        target: target.name,
        rps: Math.round(mean(runs.map((r) => r.rps))),
        rounds: runs.map((r) => Math.round(r.rps)),
        p50: median(runs.map((r) => r.p50)),
        p99: median(runs.map((r) => r.p99)),
        errors: runs.reduce((n, r) => n + r.errors, 0),
        requests: runs.reduce((n, r) => n + r.requests, 0),
      });
    }
  }
  return rows;
}

export function mean(xs: number[]): number {
  return xs.length === 0 ? NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : Math.round(((s[mid - 1]! + s[mid]!) / 2) * 100) / 100;
}
