/**
 * Scale-out (issue 31): does cluster mode grow with nodes? For k = 1, 2, 3 Vigil nodes, each in a
 * cgroup capped at the same CPU quota (a stand-in for "one more machine" on a small box), with
 * fresh nats-servers (3, JetStream R3, uncapped) and data dirs per step: durable `POST /events/`
 * round robin over 32 orgs on a paid plan, one load generator process per node (the connections
 * split evenly, the total the same at every step), once the partitions are shared out. Then the
 * same load against one embedded Vigil (sync) in a cgroup with the same quota, for the CPU per
 * event of both modes. Figures: bench/scale-out-figures.ts; goals are reported, never enforced.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { natsServerBin, startNats } from '../test/support/nats.js';
import { cgroupSkipReason, createCpuGroup, probeCgroups, quotaOf, type CpuGroup } from './cgroup.js';
import { balanced, partitionsOwned, PARTITIONS, seedRegistry, startNode } from './cluster.js';
import type { LoadSpec } from './load.js';
import { BENCH_AGENT, BENCH_EVENT, startVigil, tenantKey, type MacroOptions } from './macro.js';
import type { StartedProcess } from './peers.js';
import { foldStep, withEfficiency, type ScaleOutFigures, type ScaleRound, type ScaleStep } from './scale-out-figures.js';
import { measureRound, type ServerPids } from './scale-rounds.js';

export const SCALE_OUT_ORGS = 32;
export const SCALE_OUT_STEPS = [1, 2, 3] as const;

/**
 * Why the scenario cannot run here, or null: cgroups first (the quota is the point of it), then
 * nats-server. Printed as one loud line by the caller's log; the bench goes on.
 */
export function scaleOutSkipReason(): string | null {
  const cgroups = cgroupSkipReason(probeCgroups());
  if (cgroups !== null) return `cannot cap the nodes' CPU: ${cgroups}`;
  if (natsServerBin() === null) return 'no nats-server on PATH (Debian: apt-get install nats-server)';
  return null;
}

/** `options.connections` is the total over the nodes at every step: a multiple of 6 splits evenly over 1, 2 and 3. */
export async function runScaleOut(options: MacroOptions): Promise<ScaleOutFigures> {
  const { cpu, quotaUs } = quotaOf(process.env.VIGIL_BENCH_NODE_CPU, availableParallelism());
  if (options.connections % 6 !== 0) throw new Error(`scale-out bench: ${options.connections} connections do not split evenly over 1, 2 and 3 nodes`);
  const figures: ScaleOutFigures = { nodeCpu: cpu, orgs: SCALE_OUT_ORGS, connections: options.connections, steps: [] };
  const skipped = scaleOutSkipReason();
  if (skipped !== null) {
    options.log(`!!! SKIPPED: scale-out bench: ${skipped}`);
    return { ...figures, skipped };
  }
  const steps: ScaleStep[] = [];
  for (const k of SCALE_OUT_STEPS) steps.push(await clusterStep(k, quotaUs, options));
  steps.push(await embeddedStep(quotaUs, options));
  return { ...figures, steps: withEfficiency(steps) };
}

const orgs = Array.from({ length: SCALE_OUT_ORGS }, (_, i) => [`tenant-${i}`, tenantKey(i)] as const);

/** A cgroup name of this run (the pid keeps two benches on one machine apart). */
const groupName = (what: string): string => `vigil-bench-${process.pid}-${what}`;

async function clusterStep(k: number, quotaUs: number, options: MacroOptions): Promise<ScaleStep> {
  options.log(`scale-out: ${k} node${k === 1 ? '' : 's'}, fresh nats-servers…`);
  const nats = await startNats({ nodes: 3 });
  const dirs: string[] = [];
  const nodes: StartedProcess[] = [];
  const groups: CpuGroup[] = [];
  try {
    await seedRegistry(nats.urls, orgs);
    for (let i = 1; i <= k; i++) {
      const group = createCpuGroup(groupName(`node-${i}`), quotaUs);
      groups.push(group);
      const dir = mkdtempSync(join(tmpdir(), `vigil-bench-scale-${i}-`));
      dirs.push(dir);
      const node = await startNode(`scale-${i}`, dir, nats);
      nodes.push(node);
      // Started uncapped (start-up is not what is measured), capped before the partitions move.
      group.add(node.pid);
    }
    const urls = nodes.map((n) => `http://127.0.0.1:${n.port}`);
    await balanced(urls, PARTITIONS);
    await seedAgents(urls);
    const pids = (): ServerPids => ({ nodes: nodes.map((n) => n.pid), nats: nats.pids() });
    return await measureStep(String(k), urls, pids, () => partitionsOwned(urls), options);
  } finally {
    await Promise.allSettled(nodes.map((n) => n.stop()));
    for (const group of groups) group.remove();
    await nats.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}

async function embeddedStep(quotaUs: number, options: MacroOptions): Promise<ScaleStep> {
  options.log('scale-out: embedded (sync), same quota…');
  const group = createCpuGroup(groupName('embedded'), quotaUs);
  let vigil: Awaited<ReturnType<typeof startVigil>> | undefined;
  try {
    vigil = await startVigil('sync', SCALE_OUT_ORGS);
    group.add(vigil.proc.pid);
    const pid = vigil.proc.pid;
    return await measureStep('embedded', [vigil.url], () => ({ nodes: [pid], nats: [] }), null, options);
  } finally {
    await vigil?.proc.stop();
    group.remove();
    if (vigil !== undefined) rmSync(vigil.dir, { recursive: true, force: true });
  }
}

/** A warm-up of the whole load (3× the per-round warm-up), then the rounds, each logged. */
async function measureStep(label: string, urls: string[], pids: () => ServerPids, owned: (() => Promise<number[]>) | null, options: MacroOptions): Promise<ScaleStep> {
  const per = options.connections / urls.length;
  const specs: Omit<LoadSpec, 'durationSec'>[] = urls.map((url) => ({
    url: `${url}/events/`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    rotate: orgs.map(([, key]) => ({ authorization: `Bearer ${key}` })),
    body: BENCH_EVENT,
    connections: per,
  }));
  const what = label === 'embedded' ? `embedded × ${per} conns` : `${urls.length} node${urls.length === 1 ? '' : 's'} × ${per} conns`;
  if (options.warmupSeconds > 0) await measureRound(specs, pids(), 0, options.warmupSeconds * 3);
  const rounds: ScaleRound[] = [];
  const ownedAfter: number[][] = [];
  for (let round = 1; round <= options.rounds; round++) {
    const r = await measureRound(specs, pids(), options.warmupSeconds, options.seconds);
    rounds.push(r);
    const shares = (xs: number[]): string => xs.map((x) => (x / r.windowSeconds).toFixed(2)).join(' ');
    const after = owned === null ? null : await owned();
    if (after !== null) ownedAfter.push(after);
    options.log(
      `round ${round}/${options.rounds}  scale-out ${what.padEnd(20)} ${Math.round(r.rps).toString().padStart(6)} req/s  p99 ${r.p99} ms  errors ${r.errors}  ` +
        `cpu nodes ${shares(r.nodeCpu)}${r.natsCpu.length > 0 ? `  nats ${shares(r.natsCpu)}` : ''}  load ${r.loadCpu.map((x, i) => (x / r.loadSeconds[i]!).toFixed(2)).join(' ')}` +
        `${after === null ? '' : `  partitions ${after.join('/')}`}`,
    );
  }
  return foldStep(label, urls.length, rounds, ownedAfter);
}

/** Registers the bench agent in every org through the nodes in turn (retried while a partition finds its owner). */
async function seedAgents(urls: string[]): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (const [i, [org, key]] of orgs.entries()) {
    for (;;) {
      const res = await fetch(`${urls[i % urls.length]}/agents/`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ agent_id: BENCH_AGENT, name: 'Bench Agent' }),
      });
      if (res.status === 201 || res.status === 409) break;
      if (Date.now() > deadline) throw new Error(`scale-out bench: registering the agent of ${org}: ${res.status} ${await res.text()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}
