import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, onTestFailed } from 'vitest';
import { cannotRun, fillDisk, mountTmpfs } from '../support/faults.js';
import { call, removeDir, runCli, spawnServer, tempDir, type ServerProcess } from '../support/server.js';

// Issue 13, item 2: a full disk answers 503 + Retry-After and the process stays up; ingest resumes
// by itself once space returns; nothing acknowledged is lost. On a real 24 MiB tmpfs.

const mountPoint = tempDir('vigil-tmpfs-');
const mounted = mountTmpfs(mountPoint);
if (!mounted.ok) cannotRun('the disk-full tests', `no tmpfs (${mounted.why}); run as root`);

let server: ServerProcess | undefined;
afterAll(async () => {
  server?.child.kill('SIGKILL');
  await server?.exited;
  if (mounted.ok) execFileSync('umount', [mountPoint]);
  removeDir(mountPoint);
});

describe.skipIf(!mounted.ok)('a full disk', () => {
  it('refuses writes with 503 while full, stays up, resumes by itself and loses nothing acknowledged', async () => {
    const dataDir = join(mountPoint, 'data');
    mkdirSync(dataDir);
    // A paid plan, so the free plan's monthly quota is not what refuses.
    // A free-space floor below the 24 MiB tmpfs (the default's 64 MB would refuse every write on
    // it): the filled disk is refused by it, before LMDB finds the disk full (see FreeSpaceFloor).
    const env = { VIGIL_DATA_DIR: dataDir, VIGIL_MIN_FREE_MB: '1' };
    expect((await runCli(['keys', 'create', '--org', 'acme', '--scopes', 'admin'], env)).code).toBe(0);
    expect((await runCli(['orgs', 'set-plan', '--org', 'acme', '--plan', 'scale'], env)).code).toBe(0);
    server = await spawnServer(dataDir, env);
    // A crash is otherwise only a closed socket: what the server said last.
    onTestFailed(() => console.log(`the server's output:\n${server?.output().slice(-4000)}`));
    const { url } = server;
    expect((await call(url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } })).status).toBe(201);

    const acked: number[] = [];
    const post = async (i: number) => {
      const res = await call(url, 'POST', '/events/', { body: { agent_id: 'a', event_type: 'output_generated', payload: { i, pad: 'x'.repeat(64 * 1024) } } });
      if (res.status === 200) acked.push(res.body.event_id);
      return res;
    };
    for (let i = 0; i < 8; i++) expect((await post(i)).status).toBe(200);

    const filler = join(mountPoint, 'filler');
    fillDisk(filler);
    let refused = 0;
    for (let i = 8; i < 200 && refused < 20; i++) {
      const res = await post(i);
      if (res.status === 200) continue;
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(res.body.error.code).toBe('unavailable');
      refused++;
    }
    expect(refused).toBe(20);
    // Other routes and other kinds of writes fail closed too, and the process is still there.
    expect((await call(url, 'GET', '/health')).status).toBe(200);
    const key = await call(url, 'POST', '/admin/keys', { body: { scopes: ['events:write'] } });
    expect([201, 503]).toContain(key.status);
    expect(server.child.exitCode).toBeNull();

    rmSync(filler);
    let resumed = false;
    for (let i = 200; i < 400 && !resumed; i++) resumed = (await post(i)).status === 200;
    expect(resumed).toBe(true);
    for (let i = 400; i < 405; i++) expect((await post(i)).status).toBe(200);

    server.child.kill('SIGKILL');
    await server.exited;
    server = await spawnServer(dataDir, env);
    const exported = (await call(server.url, 'GET', '/audit/export')).text.trim().split('\n').map((l) => JSON.parse(l));
    const recorded = exported.filter((r) => r.kind === 'event').map((r) => r.body.event_id);
    for (const id of acked) expect(recorded).toContain(id);
    expect(exported.map((r) => r.seq)).toEqual(exported.map((_, i) => i + 1));
    const verify = await call(server.url, 'GET', '/audit/a/verify');
    expect(verify.body.ok).toBe(true);
    expect(verify.body.length).toBe(exported.length);
    expect((await call(server.url, 'POST', '/events/', { body: { agent_id: 'a', event_type: 'output_generated', payload: {} } })).status).toBe(200);
  });
});
