import { execFileSync } from 'node:child_process';
import { closeSync, openSync, writeSync } from 'node:fs';

/** A small tmpfs mounted on `dir` (root only), or why not. */
export function mountTmpfs(dir: string, size = '24m'): { ok: true } | { ok: false; why: string } {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' });
    return { ok: true };
  } catch (error) {
    return { ok: false, why: String((error as { stderr?: Buffer }).stderr ?? error).trim() };
  }
}

/** Writes a file until the filesystem refuses more. */
export function fillDisk(path: string): void {
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(256 * 1024, 7);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
}

/**
 * A test that needs what this machine lacks (root for a tmpfs, nginx) is skipped with one loud
 * line; with VIGIL_REQUIRE_FAULTS=1 (set by .ci/run) the lack is a failure instead.
 */
export function cannotRun(what: string, why: string): void {
  const line = `${what} cannot run here: ${why}`;
  if (process.env.VIGIL_REQUIRE_FAULTS === '1') throw new Error(`${line} (VIGIL_REQUIRE_FAULTS=1)`);
  console.error(`\n!!! SKIPPED: ${line}\n`);
}
