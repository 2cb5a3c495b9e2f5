import { lstatSync, mkdirSync, readFileSync, readlinkSync, symlinkSync, unlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { StartError } from '../errors.js';

/** The serving lock's name inside the data dir. */
export const LOCK_FILE = 'serve.lock';

/** Who serves the data dir, as the lock names it. */
export interface LockHolder {
  pid: number;
  /** The holder's start time from /proc (Linux), so a pid reused by another process is told apart; null elsewhere. */
  start: string | null;
}

export interface DataDirLock {
  readonly path: string;
  /** Removes the lock if it is still this process's. Idempotent. */
  release(): void;
}

/** Locks held by this process: a second runtime in the same process is refused too. */
const held = new Set<string>();

/**
 * Takes the exclusive serving lock of a data dir for the life of this process (until `release`), or
 * throws StartError `data_dir_locked` naming the holder's pid.
 *
 * The lock is a symbolic link whose target text names the holder (`pid=123 start=456`, as Emacs
 * locks files): creating one is atomic and fails if it exists, it is never seen half-written, and
 * such a short link needs no data block, so a full disk does not stop a restart. A lock left by a
 * dead process (kill -9, power loss) is taken over: its pid no longer runs, or runs another process
 * (its start time differs), or is this process's own pid without this process holding it (pid 1
 * in a restarted container). Taking over is serialized by a second link, so two processes starting
 * together on a stale lock cannot both win. Holders are checked in this host's pid namespace only: a
 * data dir must not be shared between hosts or containers (LMDB does not support that either).
 */
export function lockDataDir(dir: string): DataDirLock {
  mkdirSync(dir, { recursive: true });
  const path = resolve(dir, LOCK_FILE);
  if (held.has(path)) throw locked(dir, path, `this process (pid ${process.pid})`);
  const mine = describeHolder({ pid: process.pid, start: processStart(process.pid) });
  for (let attempt = 0; ; attempt++) {
    if (create(path, mine)) {
      held.add(path);
      return { path, release: () => release(path, mine) };
    }
    const seen = read(path);
    const holder = seen === undefined ? null : parseHolder(seen);
    if (holder !== null && isRunning(holder)) throw locked(dir, path, `another vigil serve, pid ${holder.pid}${since(path)}`);
    if (attempt === 3) throw locked(dir, path, 'another process starting at the same time');
    // Gone in between (released): try again. Stale: remove exactly that one, then try again.
    if (seen !== undefined) takeOver(path, seen, mine);
  }
}

function locked(dir: string, path: string, who: string): StartError {
  return new StartError(
    'data_dir_locked',
    `the data dir ${dir} is in use by ${who}: only one process may serve a data dir. Stop it first, or set VIGIL_DATA_DIR to another dir (lock: ${path}).`,
  );
}

export function describeHolder(holder: LockHolder): string {
  return `pid=${holder.pid} start=${holder.start ?? '-'}`;
}

/** The holder a lock names, or null for anything this module did not write. */
export function parseHolder(text: string): LockHolder | null {
  const m = /^pid=(\d{1,10}) start=(\d{1,20}|-)$/.exec(text);
  if (m === null || Number(m[1]) === 0) return null;
  return { pid: Number(m[1]), start: m[2] === '-' ? null : m[2]! };
}

/** Creates the lock `path` naming `text`, atomically and only if nothing is there. */
function create(path: string, text: string): boolean {
  try {
    symlinkSync(text, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
}

/** What the lock at `path` names; '' for something else there (a regular file); undefined if nothing is. */
function read(path: string): string | undefined {
  try {
    return readlinkSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'EINVAL') return '';
    throw error;
  }
}

/**
 * Removes a stale lock, but only the one seen: under the takeover guard nobody else removes or
 * replaces it, so the check and the removal cannot interleave with another process's.
 */
function takeOver(path: string, seen: string, mine: string): void {
  const guard = `${path}.takeover`;
  if (!create(guard, mine)) {
    const other = read(guard);
    const holder = other === undefined ? null : parseHolder(other);
    // Another process is taking over now: let it win. A guard left by a process that died in this
    // short section is removed (two processes meeting exactly there is the one race left).
    if (other !== undefined && (holder === null || !isRunning(holder))) removeIfSame(guard, other);
    return;
  }
  try {
    removeIfSame(path, seen);
  } finally {
    removeIfSame(guard, mine);
  }
}

function removeIfSame(path: string, expected: string): void {
  if (read(path) !== expected) return;
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

function release(path: string, mine: string): void {
  if (held.delete(path)) removeIfSame(path, mine);
}

function since(path: string): string {
  try {
    return ` (since ${lstatSync(path).mtime.toISOString()})`;
  } catch {
    return '';
  }
}

function isRunning(holder: LockHolder): boolean {
  // Our own pid, not held by us: a previous process that had the same pid (containers reuse pid 1).
  if (holder.pid === process.pid) return false;
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: it runs, as another user.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const started = processStart(holder.pid);
  return holder.start === null || started === null || started === holder.start;
}

/** A process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), or null off Linux. */
export function processStart(pid: number): string | null {
  let stat: string;
  try {
    stat = readFileSync(join('/proc', String(pid), 'stat'), 'utf8');
  } catch {
    return null;
  }
  // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields[19] ?? null;
}
