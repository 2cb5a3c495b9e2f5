/**
 * The scale-out scenario's arithmetic (bench/scale-out.ts measures, this folds): pure functions
 * of the rounds' readings, so the figures the goals are read from are unit-tested.
 */
import { median } from './macro.js';

/** What one measured round read: the load generators' answers and each process's CPU over the window. */
export interface ScaleRound {
  /** Summed over the load generators (one per node; one for embedded). */
  rps: number;
  /** The largest of the generators' p99s, ms (a p99 of the merged latencies is not to be had from wrk). */
  p99: number;
  errors: number;
  /** Requests answered 2xx: events acknowledged durable. */
  acked: number;
  /** Wall seconds from the last generator starting its measured run to the last one ending it. */
  windowSeconds: number;
  /** CPU seconds over the window, per process, in node order. */
  nodeCpu: number[];
  natsCpu: number[];
  /** Each generator's own CPU seconds over its measured run (a wrk it ran included), and that run's wall seconds. */
  loadCpu: number[];
  loadSeconds: number[];
}

/** One step (k cluster nodes, or the embedded server) folded over its rounds. */
export interface ScaleStep {
  /** `1`, `2`, `3` nodes, or `embedded`. */
  label: string;
  nodes: number;
  /** req/s of each round, in order, and their median. */
  rounds: number[];
  rps: number;
  /** X_k / (k·X_1) from the medians; 1 for k = 1, NaN for embedded. */
  efficiency: number;
  /** Median of the rounds' p99s, ms. */
  p99: number;
  errors: number;
  /** Share of one core over the window, per process (medians of the rounds). */
  nodeCpu: number[];
  natsCpu: number[];
  loadCpu: number[];
  /** Nodes' CPU µs per acknowledged event (median of the rounds); with the nats-servers' beside it. */
  cpuPerEventUs: number;
  cpuPerEventWithNatsUs: number;
  /** Partitions each node owned after each round (empty for embedded): a lease moving mid-run shows here. */
  ownedAfter: number[][];
}

export interface ScaleOutFigures {
  /** The quota of every capped process, as a share of one core. */
  nodeCpu: number;
  orgs: number;
  connections: number;
  steps: ScaleStep[];
  /** Why nothing was measured (not root, no cgroup v1 cpu controller, no nats-server), else absent. */
  skipped?: string;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;
const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

/** X_k / (k·X_1): 1 when k nodes do k times what one does. NaN without a positive X_1. */
export function efficiency(rpsK: number, k: number, rps1: number): number {
  return rps1 > 0 && k >= 1 ? round2(rpsK / (k * rps1)) : Number.NaN;
}

/** CPU µs per acknowledged event; NaN when none was acknowledged (no rate to divide by). */
export function cpuPerEventUs(cpuSeconds: number, events: number): number {
  return events > 0 ? Math.round((cpuSeconds / events) * 1e6 * 10) / 10 : Number.NaN;
}

/** CPU seconds over a window as a share of one core (0.5 = half a core). */
export function cpuShare(cpuSeconds: number, windowSeconds: number): number {
  return windowSeconds > 0 ? round2(cpuSeconds / windowSeconds) : Number.NaN;
}

/** Per-process medians of the rounds' CPU shares (process i across rounds). */
function shares(rounds: ScaleRound[], pick: (r: ScaleRound) => number[], window: (r: ScaleRound, i: number) => number): number[] {
  const count = Math.max(0, ...rounds.map((r) => pick(r).length));
  return Array.from({ length: count }, (_, i) => median(rounds.map((r) => cpuShare(pick(r)[i] ?? Number.NaN, window(r, i)))));
}

/**
 * Folds a step's rounds. The generators' CPU is over their own measured runs, the servers' over
 * the round's window; efficiency is filled in by `withEfficiency`.
 */
export function foldStep(label: string, nodes: number, rounds: ScaleRound[], ownedAfter: number[][]): ScaleStep {
  return {
    label,
    nodes,
    rounds: rounds.map((r) => Math.round(r.rps)),
    rps: Math.round(median(rounds.map((r) => r.rps))),
    efficiency: Number.NaN,
    p99: median(rounds.map((r) => r.p99)),
    errors: sum(rounds.map((r) => r.errors)),
    nodeCpu: shares(rounds, (r) => r.nodeCpu, (r) => r.windowSeconds),
    natsCpu: shares(rounds, (r) => r.natsCpu, (r) => r.windowSeconds),
    loadCpu: shares(rounds, (r) => r.loadCpu, (r, i) => r.loadSeconds[i] ?? Number.NaN),
    cpuPerEventUs: median(rounds.map((r) => cpuPerEventUs(sum(r.nodeCpu), r.acked))),
    cpuPerEventWithNatsUs: median(rounds.map((r) => cpuPerEventUs(sum(r.nodeCpu) + sum(r.natsCpu), r.acked))),
    ownedAfter,
  };
}

/** The cluster steps' efficiency against the one-node step (the embedded step keeps NaN). */
export function withEfficiency(steps: ScaleStep[]): ScaleStep[] {
  const one = steps.find((s) => s.label === '1');
  return steps.map((s) => (s.label === 'embedded' || one === undefined ? s : { ...s, efficiency: efficiency(s.rps, s.nodes, one.rps) }));
}

export interface Goal {
  name: string;
  target: string;
  measured: string;
  met: boolean;
}

/**
 * The goals, read at the largest cluster step measured: efficiency ≥ 0.8 at 3 nodes, and
 * the cluster's CPU per event within 2× the embedded server's. None when nothing was measured.
 */
export function scaleOutGoals(f: ScaleOutFigures): Goal[] {
  const cluster = f.steps.filter((s) => s.label !== 'embedded');
  const top = cluster.at(-1);
  const embedded = f.steps.find((s) => s.label === 'embedded');
  if (f.skipped !== undefined || top === undefined) return [];
  const goals: Goal[] = [
    { name: `scale-out efficiency X_k/(k·X_1) at ${top.nodes} nodes (${f.nodeCpu} CPU each)`, target: '≥ 0.8', measured: top.efficiency.toFixed(2), met: top.efficiency >= 0.8 },
  ];
  if (embedded !== undefined) {
    const ratio = round2(top.cpuPerEventUs / embedded.cpuPerEventUs);
    goals.push({
      name: `cluster CPU per event (${top.nodes} nodes) vs embedded`,
      target: '≤ 2.0×',
      measured: `${Number.isFinite(ratio) ? ratio.toFixed(2) : 'n/a'}× (${top.cpuPerEventUs} vs ${embedded.cpuPerEventUs} µs)`,
      met: ratio <= 2,
    });
  }
  return goals;
}
