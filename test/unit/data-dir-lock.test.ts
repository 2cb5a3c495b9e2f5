import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readlinkSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StartError } from '../../src/errors.js';
import { describeHolder, LOCK_FILE, lockDataDir, parseHolder, processStart } from '../../src/store/data-dir-lock.js';
import { removeDir, ROOT, tempDir } from '../support/server.js';

const dirs: string[] = [];
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of dirs.splice(0)) removeDir(dir);
});

function dir(): string {
  const d = tempDir('vigil-lock-');
  dirs.push(d);
  return d;
}

const holderOf = (d: string) => parseHolder(readlinkSync(join(d, LOCK_FILE)));
/** Leaves a lock as another process would have. */
const plant = (d: string, pid: number, start: string | null): void => symlinkSync(describeHolder({ pid, start }), join(d, LOCK_FILE));

/** A pid that ran and has exited (and been reaped). */
function deadPid(): number {
  const pid = spawnSync(process.execPath, ['-e', '0']).pid;
  expect(pid).toBeGreaterThan(0);
  return pid;
}

function refusal(fn: () => unknown): StartError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(StartError);
    return error as StartError;
  }
  throw new Error('expected the lock to be refused');
}

/**
 * Another process trying the lock once told to go (a line on its stdin, so that several start
 * together): prints `ready`, then `won` or `lost`, then holds whatever it got until killed.
 */
function contender(d: string): { child: ChildProcess; ready: Promise<void>; go: () => void; result: Promise<string> } {
  const script = `import { lockDataDir } from './src/store/data-dir-lock.ts';
console.log('ready');
process.stdin.once('data', () => {
  try { lockDataDir(${JSON.stringify(d)}); console.log('won'); } catch (e) { console.log(e.code === 'data_dir_locked' ? 'lost' : 'error ' + e.message); }
  setInterval(() => {}, 1000);
});`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(child);
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  const line = (n: number): Promise<string> =>
    new Promise<string>((resolve, reject) => {
      const check = (): void => {
        const lines = out.split('\n');
        if (lines.length > n + 1) resolve(lines[n]!.trim());
      };
      child.stdout.on('data', check);
      child.on('exit', (code) => reject(new Error(`contender exited (${code}) before answering: ${out}`)));
    });
  const ready = line(0).then((l) => expect(l).toBe('ready'));
  return { child, ready: ready.then(() => undefined), go: () => child.stdin.write('go\n'), result: line(1) };
}

describe('data dir lock', () => {
  it('is exclusive within this process, names the pid, and is released on release()', () => {
    const d = dir();
    const lock = lockDataDir(d);
    expect(holderOf(d)).toEqual({ pid: process.pid, start: processStart(process.pid) });
    expect(lstatSync(join(d, LOCK_FILE)).isSymbolicLink()).toBe(true);
    const again = refusal(() => lockDataDir(d));
    expect(again.code).toBe('data_dir_locked');
    expect(again.message).toContain(`pid ${process.pid}`);
    lock.release();
    expect(existsSync(join(d, LOCK_FILE))).toBe(false);
    lock.release(); // idempotent
    lockDataDir(d).release();
    // Nothing else is left in the dir: the files written aside are gone.
    expect(readdirSync(d)).toEqual([]);
  });

  it('is refused while another process holds it, and taken over once that process is killed with SIGKILL', async () => {
    const d = dir();
    const other = contender(d);
    await other.ready;
    other.go();
    expect(await other.result).toBe('won');
    const refused = refusal(() => lockDataDir(d));
    expect(refused.message).toContain(`pid ${other.child.pid}`);
    other.child.kill('SIGKILL');
    await new Promise((resolve) => other.child.once('exit', resolve));
    const lock = lockDataDir(d);
    expect(holderOf(d)).toMatchObject({ pid: process.pid });
    lock.release();
  });

  it('takes over a lock left by a dead pid, by this pid (a restarted container), or unreadable', () => {
    const leftovers: ((d: string) => void)[] = [
      (d) => plant(d, deadPid(), null),
      (d) => plant(d, process.pid, processStart(process.pid)),
      (d) => symlinkSync('garbage', join(d, LOCK_FILE)),
      (d) => writeFileSync(join(d, LOCK_FILE), 'a regular file'),
    ];
    for (const leave of leftovers) {
      const d = dir();
      leave(d);
      const lock = lockDataDir(d);
      expect(holderOf(d)).toMatchObject({ pid: process.pid });
      lock.release();
    }
  });

  it.runIf(processStart(process.pid) !== null)('takes over a lock whose pid now runs another process (pid reuse)', () => {
    const d = dir();
    // The parent runs, but it is not the process that wrote this lock: its start time differs.
    plant(d, process.ppid, '1');
    const lock = lockDataDir(d);
    expect(holderOf(d)).toMatchObject({ pid: process.pid });
    lock.release();
    // With the right start time it is a live holder.
    plant(d, process.ppid, processStart(process.ppid));
    expect(refusal(() => lockDataDir(d)).message).toContain(`pid ${process.ppid}`);
  });

  it('lets exactly one of several processes racing on a stale lock win', async () => {
    for (let round = 0; round < 3; round++) {
      const d = dir();
      plant(d, deadPid(), null);
      const racers = Array.from({ length: 6 }, () => contender(d));
      await Promise.all(racers.map((r) => r.ready));
      for (const r of racers) r.go();
      const results = await Promise.all(racers.map((r) => r.result));
      expect(results.filter((r) => r === 'won'), results.join(',')).toHaveLength(1);
      expect(results.filter((r) => r === 'lost')).toHaveLength(5);
      const winner = racers[results.indexOf('won')]!.child.pid;
      expect(holderOf(d)).toMatchObject({ pid: winner });
      for (const r of racers) r.child.kill('SIGKILL');
    }
  });

  it('release leaves a lock file that is no longer this process’s', () => {
    const d = dir();
    const lock = lockDataDir(d);
    unlinkSync(join(d, LOCK_FILE));
    plant(d, 1, null);
    lock.release();
    expect(holderOf(d)).toEqual({ pid: 1, start: null });
  });
});
