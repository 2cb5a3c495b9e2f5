import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CPU_CGROUP_ROOT, cgroupSkipReason, createCpuGroup, probeCgroups } from '../../bench/cgroup.js';

// The real cgroup v1 cpu controller, as the scale-out bench uses it; loudly skipped where it cannot be written.
const reason = cgroupSkipReason(probeCgroups());
if (reason !== null) console.error(`\n!!! SKIPPED: bench cgroups cannot be tested here: ${reason}\n`);

const sleeper = spawn('sleep', ['60'], { stdio: 'ignore' });
afterAll(() => {
  sleeper.kill('SIGKILL');
});

const cpuGroupOf = (pid: number): string | undefined =>
  readFileSync(`/proc/${pid}/cgroup`, 'utf8')
    .split('\n')
    .map((line) => line.split(':'))
    .find(([, controllers]) => controllers?.split(',').includes('cpu'))?.[2];

describe.skipIf(reason !== null)('a bench CPU group', () => {
  const name = `vigil-test-${process.pid}`;

  it('caps with the quota given, holds the process put in it, and is gone after remove with the process back at the root', () => {
    const group = createCpuGroup(name, 20_000);
    try {
      expect(readFileSync(join(CPU_CGROUP_ROOT, name, 'cpu.cfs_quota_us'), 'utf8').trim()).toBe('20000');
      expect(readFileSync(join(CPU_CGROUP_ROOT, name, 'cpu.cfs_period_us'), 'utf8').trim()).toBe('100000');
      group.add(sleeper.pid!);
      expect(cpuGroupOf(sleeper.pid!)).toBe(`/${name}`);
    } finally {
      // Removed while the process still runs in it: it goes back to the parent first.
      group.remove();
    }
    expect(existsSync(join(CPU_CGROUP_ROOT, name))).toBe(false);
    expect(cpuGroupOf(sleeper.pid!)).toBe('/');
    expect(() => group.remove()).not.toThrow();
  });

  it('replaces a stale group of the same name (a run that died) rather than failing', () => {
    const stale = createCpuGroup(name, 30_000);
    stale.add(sleeper.pid!);
    const fresh = createCpuGroup(name, 40_000);
    try {
      expect(readFileSync(join(CPU_CGROUP_ROOT, name, 'cpu.cfs_quota_us'), 'utf8').trim()).toBe('40000');
      expect(cpuGroupOf(sleeper.pid!)).toBe('/');
    } finally {
      fresh.remove();
      stale.remove();
    }
    expect(existsSync(join(CPU_CGROUP_ROOT, name))).toBe(false);
  });
});
