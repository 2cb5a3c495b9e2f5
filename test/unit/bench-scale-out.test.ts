import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cgroupSkipReason, probeCgroups, quotaOf } from '../../bench/cgroup.js';
import { isBalanced } from '../../bench/cluster.js';
import { cpuSeconds, parseProcStat } from '../../bench/proc-cpu.js';
import { scaleOutText } from '../../bench/report.js';
import { cpuPerEventUs, efficiency, foldStep, scaleOutGoals, withEfficiency, type ScaleOutFigures, type ScaleRound } from '../../bench/scale-out-figures.js';

describe('/proc/<pid>/stat', () => {
  it('counts fields from the last parenthesis, so a command name with spaces and parentheses does not shift them', () => {
    // utime 250, stime 50, cutime 30, cstime 20 ticks (fields 14 to 17).
    const line = '4242 (node (tsx) a b) S 1 4242 4242 0 -1 4194560 1 0 0 0 250 50 30 20 20 0 11 0 100 0 0\n';
    expect(parseProcStat(line)).toEqual({ own: 3, children: 0.5 });
  });
  it('refuses a line that is not one', () => {
    expect(() => parseProcStat('no parenthesis here')).toThrow(/not a \/proc/);
    expect(() => parseProcStat('1 (x) S 1 2')).toThrow(/not a \/proc/);
  });
  it('reads this process, and NaN for a pid that does not exist', () => {
    expect(cpuSeconds('self')).toBeGreaterThan(0);
    expect(cpuSeconds(2 ** 30)).toBeNaN();
  });
});

describe('the skip rule', () => {
  it('names the first missing condition, or none', () => {
    expect(cgroupSkipReason({ root: false, controller: true, writable: null })).toMatch(/not root/);
    expect(cgroupSkipReason({ root: true, controller: false, writable: null })).toMatch(/no cgroup v1 cpu controller/);
    expect(cgroupSkipReason({ root: true, controller: true, writable: false })).toMatch(/cannot make a cgroup/);
    expect(cgroupSkipReason({ root: true, controller: true, writable: true })).toBeNull();
  });
  it('finds no controller in a directory without cpu.cfs_quota_us, and a writable one where it is', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vigil-test-cgroup-'));
    try {
      expect(probeCgroups(dir).controller).toBe(false);
      writeFileSync(join(dir, 'cpu.cfs_quota_us'), '-1\n');
      const facts = probeCgroups(dir);
      expect(facts.controller).toBe(true);
      // Only tried as root (the writing that matters needs it).
      expect(facts.writable).toBe(process.getuid?.() === 0 ? true : null);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('takes VIGIL_BENCH_NODE_CPU as a share of a core, 0.5 unless set, and refuses what is not one', () => {
    expect(quotaOf(undefined, 2)).toEqual({ cpu: 0.5, quotaUs: 50_000 });
    expect(quotaOf(' 0.3 ', 2)).toEqual({ cpu: 0.3, quotaUs: 30_000 });
    expect(quotaOf('2', 2)).toEqual({ cpu: 2, quotaUs: 200_000 });
    for (const bad of ['0', '-1', 'half', '3']) expect(() => quotaOf(bad, 2)).toThrow(/VIGIL_BENCH_NODE_CPU/);
  });
});

describe('partitions shared out', () => {
  it('holds when every partition is owned and no node is above ceil(partitions / nodes)', () => {
    expect(isBalanced([64], 64)).toBe(true);
    expect(isBalanced([32, 32], 64)).toBe(true);
    expect(isBalanced([22, 20, 22], 64)).toBe(true);
    expect(isBalanced([23, 21, 20], 64)).toBe(false);
    expect(isBalanced([22, 22, 19], 64)).toBe(false);
    expect(isBalanced([40, 24], 64)).toBe(false);
  });
});

const round = (over: Partial<ScaleRound>): ScaleRound => ({ rps: 1000, p99: 10, errors: 0, acked: 10_000, windowSeconds: 10, nodeCpu: [5], natsCpu: [1, 1, 1], loadCpu: [2], loadSeconds: [10], ...over });

describe('scale-out figures', () => {
  it('efficiency is X_k / (k·X_1), CPU per event the CPU over the events acknowledged', () => {
    expect(efficiency(1200, 3, 500)).toBe(0.8);
    expect(efficiency(900, 2, 500)).toBe(0.9);
    expect(efficiency(900, 2, 0)).toBeNaN();
    expect(cpuPerEventUs(0.5, 5000)).toBe(100);
    expect(cpuPerEventUs(0.5, 0)).toBeNaN();
  });
  it('folds rounds into medians, CPU as shares of a core over each window, per process', () => {
    const step = foldStep('2', 2, [
      round({ rps: 900, p99: 30, acked: 9000, nodeCpu: [4, 5], natsCpu: [1, 2, 3], loadCpu: [1, 1], loadSeconds: [10, 10] }),
      round({ rps: 1100, p99: 10, errors: 2, acked: 11_000, windowSeconds: 5, nodeCpu: [2.5, 2.5], natsCpu: [0.5, 0.5, 0.5], loadCpu: [0.5, 1], loadSeconds: [5, 5] }),
      round({ rps: 1000, p99: 20, acked: 10_000, nodeCpu: [5, 5], natsCpu: [1, 3, 3], loadCpu: [1, 2], loadSeconds: [10, 10] }),
    ], [[32, 32], [32, 32], [32, 32]]);
    expect(step.rounds).toEqual([900, 1100, 1000]);
    expect(step.rps).toBe(1000);
    expect(step.p99).toBe(20);
    expect(step.errors).toBe(2);
    expect(step.nodeCpu).toEqual([0.5, 0.5]);
    expect(step.natsCpu).toEqual([0.1, 0.2, 0.3]);
    expect(step.loadCpu).toEqual([0.1, 0.2]);
    // Rounds: 9 s / 9,000, 5 s / 11,000, 10 s / 10,000 events: 1,000, 454.5 and 1,000 µs; the median.
    expect(step.cpuPerEventUs).toBe(1000);
    // With the nats-servers: 15 s / 9,000, 6.5 s / 11,000, 17 s / 10,000.
    expect(step.cpuPerEventWithNatsUs).toBe(1666.7);
  });
  it('reads the goals at 3 nodes and against embedded, met or not, and none when skipped', () => {
    const one = foldStep('1', 1, [round({ rps: 1000 })], []);
    const three = foldStep('3', 3, [round({ rps: 2400, nodeCpu: [5, 5, 5], acked: 10_000 })], []);
    const embedded = foldStep('embedded', 1, [round({ rps: 4000, nodeCpu: [5], acked: 20_000, natsCpu: [] })], []);
    const figures: ScaleOutFigures = { nodeCpu: 0.5, orgs: 32, connections: 48, steps: withEfficiency([one, three, embedded]) };
    expect(figures.steps.map((s) => s.efficiency)).toEqual([1, 0.8, Number.NaN]);
    const goals = scaleOutGoals(figures);
    expect(goals.map((g) => [g.target, g.met])).toEqual([['≥ 0.8', true], ['≤ 2.0×', false]]);
    // 1,500 µs per event on three nodes against 250 embedded.
    expect(goals[1]!.measured).toBe('6.00× (1500 vs 250 µs)');
    expect(scaleOutGoals({ ...figures, skipped: 'not root' })).toEqual([]);
  });
});

describe('the scale-out table', () => {
  it('shows one row saying why when skipped, else a row per step with CPU per event against embedded', () => {
    expect(scaleOutText({ nodeCpu: 0.5, orgs: 32, connections: 48, steps: [], skipped: 'not root' })).toContain('skipped: not root');
    const three = foldStep('3', 3, [round({ rps: 2400, nodeCpu: [5, 5, 5] })], [[22, 22, 20]]);
    const embedded = foldStep('embedded', 1, [round({ rps: 4000, nodeCpu: [5], acked: 20_000, natsCpu: [] })], []);
    const text = scaleOutText({ nodeCpu: 0.5, orgs: 32, connections: 48, steps: [three, embedded] });
    expect(text).toContain('1,500 µs (6.00× embedded)');
    expect(text).toContain('embedded (sync)');
    expect(text).toContain('0.50 0.50 0.50');
  });
});
