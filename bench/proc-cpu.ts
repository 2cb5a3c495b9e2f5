/**
 * CPU time of Linux processes from /proc/<pid>/stat, for the bench's CPU figures: the delta of
 * two readings over a window is the CPU the process used in it, whoever started it.
 */
import { readFileSync } from 'node:fs';

/**
 * Clock ticks per second of the stat fields (`getconf CLK_TCK`): 100 on every Linux the bench runs
 * on (x86-64 and arm64 kernels fix USER_HZ at 100), so not asked of the system each time.
 */
export const CLOCK_TICKS = 100;

export interface ProcCpu {
  /** utime + stime: the process's own threads, in seconds. */
  own: number;
  /** cutime + cstime: its children that exited and were waited for (e.g. a wrk it ran), in seconds. */
  children: number;
}

/**
 * Parses a /proc/<pid>/stat line. The second field is the command name in parentheses, which may
 * itself hold spaces and parentheses, so fields are counted from the last `)`: utime, stime,
 * cutime and cstime are fields 14 to 17 of the line. Throws on a line that is not one.
 */
export function parseProcStat(line: string, ticks = CLOCK_TICKS): ProcCpu {
  const close = line.lastIndexOf(')');
  const fields = close === -1 ? [] : line.slice(close + 2).trim().split(/\s+/);
  // fields[0] is field 3 (state); field n is fields[n - 3].
  const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(fields[i]));
  if (![utime, stime, cutime, cstime].every((n) => Number.isInteger(n) && n! >= 0)) throw new Error(`not a /proc/<pid>/stat line: ${JSON.stringify(line.slice(0, 200))}`);
  return { own: (utime! + stime!) / ticks, children: (cutime! + cstime!) / ticks };
}

/** The process's own CPU seconds so far (utime + stime), or NaN once it is gone. */
export function cpuSeconds(pid: number | 'self'): number {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8')).own;
  } catch {
    return Number.NaN;
  }
}

/** This process's CPU seconds so far, its waited-for children's included (a load generator that runs wrk). */
export function selfCpuWithChildren(): number {
  const cpu = parseProcStat(readFileSync('/proc/self/stat', 'utf8'));
  return cpu.own + cpu.children;
}
