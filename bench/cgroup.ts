/**
 * CPU quotas for bench processes through the cgroup v1 cpu controller: a group per process, its
 * `cpu.cfs_quota_us` over a 100 ms period, the process's pid written to `cgroup.procs` (its threads
 * follow, and so would any child it started later). A group capped at the same quota stands in for
 * "one more machine" on a small box. Needs root and a v1 cpu hierarchy mounted; where either is
 * missing the scenario is skipped (`cgroupSkipReason`), never run uncapped.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const CPU_CGROUP_ROOT = '/sys/fs/cgroup/cpu';
export const CFS_PERIOD_US = 100_000;

/** What decides whether the bench can cap processes here. */
export interface CgroupFacts {
  root: boolean;
  /** The v1 cpu controller is mounted at the root given (its `cpu.cfs_quota_us` is there). */
  controller: boolean;
  /** A group could be made and removed there (null when not tried). */
  writable: boolean | null;
}

/** Why the capped scenario cannot run here, or null when it can. */
export function cgroupSkipReason(facts: CgroupFacts, root = CPU_CGROUP_ROOT): string | null {
  if (!facts.root) return 'not root (writing cgroups needs root)';
  if (!facts.controller) return `no cgroup v1 cpu controller at ${root} (cgroup v2 only, or not mounted)`;
  if (facts.writable === false) return `cannot make a cgroup under ${root} (read-only, or a container without cgroup rights)`;
  return null;
}

/** Looks: root or not, the controller there or not, and (only when both hold) makes and removes a probe group. */
export function probeCgroups(root = CPU_CGROUP_ROOT): CgroupFacts {
  const isRoot = process.getuid?.() === 0;
  const controller = existsSync(join(root, 'cpu.cfs_quota_us'));
  if (!isRoot || !controller) return { root: isRoot, controller, writable: null };
  const probe = join(root, `vigil-bench-probe-${process.pid}`);
  try {
    mkdirSync(probe);
    rmdirSync(probe);
    return { root: isRoot, controller, writable: true };
  } catch {
    return { root: isRoot, controller, writable: false };
  }
}

/**
 * `VIGIL_BENCH_NODE_CPU` (a share of one core, default 0.5) as a CFS quota in µs per 100 ms
 * period. Anything but a number above 0 and at most the machine's cores is refused, loudly.
 */
export function quotaOf(value: string | undefined, cores: number): { cpu: number; quotaUs: number } {
  const text = (value ?? '').trim();
  const cpu = text === '' ? 0.5 : Number(text);
  if (!Number.isFinite(cpu) || cpu <= 0 || cpu > cores) throw new Error(`VIGIL_BENCH_NODE_CPU must be a share of a core above 0 and at most ${cores} (the cores here), not ${JSON.stringify(text)}`);
  // The kernel's floor is 1 ms per period.
  return { cpu, quotaUs: Math.max(1000, Math.round(cpu * CFS_PERIOD_US)) };
}

export interface CpuGroup {
  readonly name: string;
  /** Moves a process (all its threads) into the group. */
  add(pid: number): void;
  /**
   * Removes the group: moves whatever is still in it back to the parent, then rmdir (retried a
   * short while, as a process just stopped may linger). Safe to call twice; also runs on exit.
   */
  remove(): void;
}

/** Makes a group `name` under `root` with the quota, fresh (a stale group of that name is removed first). */
export function createCpuGroup(name: string, quotaUs: number, root = CPU_CGROUP_ROOT): CpuGroup {
  const dir = join(root, name);
  const removeNow = (): void => {
    if (!existsSync(dir)) return;
    for (let attempt = 0; ; attempt++) {
      for (const pid of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter((l) => l !== '')) {
        try {
          writeFileSync(join(root, 'cgroup.procs'), pid);
        } catch {
          // Gone since the read: nothing to move.
        }
      }
      try {
        rmdirSync(dir);
        return;
      } catch (error) {
        if (attempt >= 40) throw new Error(`cannot remove cgroup ${dir}: ${String(error)}`);
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
      }
    }
  };
  removeNow();
  mkdirSync(dir);
  const onExit = (): void => {
    try {
      removeNow();
    } catch {
      // Exiting: nothing left to report it to.
    }
  };
  try {
    writeFileSync(join(dir, 'cpu.cfs_period_us'), String(CFS_PERIOD_US));
    writeFileSync(join(dir, 'cpu.cfs_quota_us'), String(quotaUs));
  } catch (error) {
    removeNow();
    throw error;
  }
  process.once('exit', onExit);
  return {
    name,
    add: (pid) => writeFileSync(join(dir, 'cgroup.procs'), String(pid)),
    remove: () => {
      process.removeListener('exit', onExit);
      removeNow();
    },
  };
}
