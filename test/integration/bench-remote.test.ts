import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTargets, TARGET_AGENT } from '../../bench/targets.js';
import { ADMIN_KEY, call, removeDir, spawnServer, tempDir, type ServerProcess } from '../support/server.js';

/**
 * `npm run bench -- --targets` (bench/targets.ts) against a running `vigil serve`: what the
 * compose file's bench service runs against the cluster, here against one embedded node.
 */
describe('the bench against running nodes (--targets)', () => {
  const dataDir = tempDir();
  let server: ServerProcess;

  beforeAll(async () => {
    server = await spawnServer(dataDir);
  });
  afterAll(async () => {
    server.child.kill('SIGTERM');
    await server.exited;
    removeDir(dataDir);
  });

  it('measures each scenario without errors, and every event it counted is in the ledger; a second run reuses the agent', async () => {
    const options = { urls: [server.url], key: ADMIN_KEY, rounds: 1, seconds: 1, warmupSeconds: 0, connections: 4, log: () => {} };
    let posted = 0;
    for (let run = 0; run < 2; run++) {
      const rows = await runTargets(options);
      expect(rows.map((r) => [r.scenario, r.target, r.errors])).toEqual([
        ['POST /events/', server.url, 0],
        ['GET /agents/{id}', server.url, 0],
      ]);
      for (const row of rows) expect(row.requests, row.scenario).toBeGreaterThan(0);
      posted += rows[0]!.requests;
    }
    // The load tool counts answered requests; one cut off at the end may still have been recorded.
    const agent = await call(server.url, 'GET', `/agents/${TARGET_AGENT}`);
    expect(agent.body.ledger_records).toBeGreaterThanOrEqual(1 + posted);
    expect(agent.body.ledger_records).toBeLessThanOrEqual(1 + posted + 2 * options.connections);
  });

  it('fails at once on a key the target refuses', async () => {
    await expect(runTargets({ urls: [server.url], key: 'vgl_not-a-key', rounds: 1, seconds: 1, warmupSeconds: 0, connections: 1, log: () => {} })).rejects.toThrow(/answered 401/);
  });
});
