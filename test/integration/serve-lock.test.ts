import { execFileSync } from 'node:child_process';
import { existsSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StartError } from '../../src/errors.js';
import { LOCK_FILE, parseHolder } from '../../src/store/data-dir-lock.js';
import { cannotRun, fillDisk, mountTmpfs } from '../support/faults.js';
import { ADMIN_KEY, call, ORG, removeDir, runCli, spawnServer, STACK_LINE, startServer, tempDir, type ServerProcess } from '../support/server.js';

async function stop(proc: ServerProcess): Promise<void> {
  if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGTERM');
  await proc.exited;
}

const lockPid = (dir: string): number | undefined => parseHolder(readlinkSync(join(dir, LOCK_FILE)))?.pid;

describe('one process serves a data dir', () => {
  it('a second `serve` on the same data dir exits at once naming the holder pid; the CLI keeps working beside the server', async () => {
    const dir = tempDir();
    const proc = await spawnServer(dir);
    try {
      expect(lockPid(dir)).toBe(proc.child.pid);
      const second = await runCli(['serve'], { VIGIL_DATA_DIR: dir, VIGIL_PORT: '0' });
      expect(second.timedOut).toBe(false);
      expect(second.code).toBe(1);
      expect(second.stderr).toContain(`pid ${proc.child.pid}`);
      expect(second.stderr).toContain('in use');
      expect(second.stderr).not.toMatch(STACK_LINE);
      // It opened nothing: the server still answers and still holds the lock.
      expect((await call(proc.url, 'GET', '/health')).status).toBe(200);
      expect(lockPid(dir)).toBe(proc.child.pid);

      // keys create and orgs set-plan open the store beside the running server, which sees their writes.
      const created = await runCli(['keys', 'create', '--org', 'beside', '--scopes', 'admin,events:write', '--name', 'cli'], { VIGIL_DATA_DIR: dir });
      expect(created.code).toBe(0);
      const key = created.stdout.trim().split('\n').at(-1)!;
      expect(key).toMatch(/^vgl_/);
      const me = await call(proc.url, 'GET', '/orgs/me', { key });
      expect(me.status).toBe(200);
      expect(me.body).toMatchObject({ slug: 'beside', plan: 'free', key: { name: 'cli', scopes: ['admin', 'events:write'] } });
      const plan = await runCli(['orgs', 'set-plan', '--org', 'beside', '--plan', 'team'], { VIGIL_DATA_DIR: dir });
      expect(plan.code).toBe(0);
      expect((await call(proc.url, 'GET', '/billing/plan', { key })).body).toMatchObject({ org: 'beside', plan: 'team' });
      expect((await call(proc.url, 'POST', '/agents', { key, body: { agent_id: 'a1', name: 'A1' } })).status).toBe(201);
    } finally {
      await stop(proc);
      removeDir(dir);
    }
  });

  it('the CLI with no command prints the usage and exits; it never serves', async () => {
    const dir = join(tempDir(), 'data');
    try {
      const bare = await runCli([], { VIGIL_DATA_DIR: dir, VIGIL_PORT: '0' });
      expect(bare.timedOut).toBe(false);
      expect(bare.code).toBe(2);
      expect(bare.stderr).toContain('usage: vigil <command>');
      expect(bare.stdout).not.toContain('listening');
      expect(existsSync(dir)).toBe(false);
    } finally {
      removeDir(join(dir, '..'));
    }
  });

  it('a second runtime in the same process is refused with a clear error; the lock goes with close()', async () => {
    const dir = tempDir();
    const first = await startServer({}, dir);
    let closed = false;
    try {
      const refused = await startServer({}, dir).then(
        () => null,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(StartError);
      expect((refused as StartError).code).toBe('data_dir_locked');
      expect((refused as StartError).message).toContain(`pid ${process.pid}`);
      expect((await call(first.url, 'GET', '/health')).status).toBe(200);
      await first.close();
      closed = true;
      expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
      const again = await startServer({}, dir);
      await again.close();
    } finally {
      if (!closed) await first.close();
      removeDir(dir);
    }
  });

  it('takes over the lock of a server killed with SIGKILL', async () => {
    const dir = tempDir();
    try {
      const killed = await spawnServer(dir);
      killed.child.kill('SIGKILL');
      await killed.exited;
      expect(lockPid(dir)).toBe(killed.child.pid);
      const next = await spawnServer(dir);
      try {
        expect(lockPid(dir)).toBe(next.child.pid);
        expect((await call(next.url, 'GET', '/orgs/me')).body.slug).toBe(ORG);
      } finally {
        await stop(next);
      }
      expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    } finally {
      removeDir(dir);
    }
  });
});


describe('the lock on a full disk', () => {
  it('a server killed with SIGKILL restarts while the disk is full: taking over its lock needs no space', async (ctx) => {
    const mountPoint = tempDir('vigil-lock-tmpfs-');
    const mounted = mountTmpfs(mountPoint);
    if (!mounted.ok) {
      removeDir(mountPoint);
      cannotRun('the full-disk lock test', `no tmpfs (${mounted.why}); run as root`);
      ctx.skip();
      return;
    }
    const dir = join(mountPoint, 'data');
    try {
      // A floor below the 24 MiB tmpfs (the default's 64 MB would refuse every write on it).
      const floor = { VIGIL_MIN_FREE_MB: '1' };
      const killed = await spawnServer(dir, floor);
      killed.child.kill('SIGKILL');
      await killed.exited;
      fillDisk(join(mountPoint, 'filler'));
      const next = await spawnServer(dir, floor);
      try {
        expect(lockPid(dir)).toBe(next.child.pid);
        expect((await call(next.url, 'GET', '/orgs/me')).status).toBe(200);
      } finally {
        await stop(next);
      }
    } finally {
      execFileSync('umount', [mountPoint]);
      removeDir(mountPoint);
    }
  });
});

describe('one process listens on a port', () => {
  it('a second server on the same port (another data dir) fails with a clear error and leaves its data dir unlocked', async () => {
    const dir = tempDir();
    const other = tempDir();
    const proc = await spawnServer(dir);
    const port = new URL(proc.url).port;
    try {
      const second = await runCli(['serve'], { VIGIL_DATA_DIR: other, VIGIL_PORT: port, VIGIL_BOOTSTRAP_ORG: ORG, VIGIL_BOOTSTRAP_KEY: ADMIN_KEY });
      expect(second.timedOut).toBe(false);
      expect(second.code).toBe(1);
      expect(second.stderr).toContain(`cannot listen on 127.0.0.1:${port}`);
      expect(second.stderr).not.toMatch(STACK_LINE);

      // In this process too; the failed start closes its store and releases its lock.
      const refused = await startServer({ VIGIL_PORT: port }, other).then(
        () => null,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(StartError);
      expect((refused as StartError).code).toBe('listen_failed');
      expect(existsSync(join(other, LOCK_FILE))).toBe(false);
      const elsewhere = await startServer({}, other);
      await elsewhere.close();
      expect((await call(proc.url, 'GET', '/health')).status).toBe(200);
    } finally {
      await stop(proc);
      removeDir(dir);
      removeDir(other);
    }
  });
});
