import { cpSync } from 'node:fs';
import { open, type Database } from 'lmdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentDirectory } from '../../src/actors/agent-directory.js';
import { ExportLog } from '../../src/actors/export-log.js';
import { OrgRecovery } from '../../src/actors/org-recovery.js';
import type { OrgRebuild } from '../../src/actors/rebuild.js';
import { replayPartitioned } from '../../src/store/partitioned-replay.js';
import { ReviewQueue } from '../../src/actors/review-queue.js';
import { UsageMeter } from '../../src/actors/usage-meter.js';
import { POLICY_V1 } from '../../src/domain/policy.js';
import { LmdbEnv } from '../../src/store/lmdb-env.js';
import { LmdbLedger } from '../../src/store/lmdb-ledger.js';
import { startReceiver, waitFor } from '../support/receiver.js';
import { call, ORG, removeDir, startServer, tempDir } from '../support/server.js';

/**
 * A ledger with what every consumer folds: agents registered, updated, made public and retired;
 * events that pass, hold, alert and collapse; reviews released, rejected and escalated; exports.
 */
let dir: string;
let length: number;

beforeAll(async () => {
  const server = await startServer();
  dir = server.dataDir;
  const url = server.url;
  const post = async (path: string, body: unknown): Promise<any> => {
    const res = await call(url, 'POST', path, { body });
    expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
    return res.body;
  };
  const agents = Array.from({ length: 24 }, (_, i) => `agent-${i}`);
  for (const id of agents) await post('/agents/', { agent_id: id, name: id, observed: Number(id.slice(6)) % 3 !== 0 });
  await call(url, 'PATCH', '/admin/agents/agent-1', { body: { public: true } });
  for (let round = 0; round < 12; round++) {
    for (const [i, id] of agents.entries()) {
      const risky = (i + round) % 7 === 0;
      const type = ['output_generated', 'config_read', 'file_operation', 'evaluation_score', 'monitoring_state_change'][(i + round) % 5];
      await post('/events/', {
        agent_id: id,
        event_type: type,
        payload: { key: 'api_token', path: '/var/log/audit.log', operation: round % 2 === 0 ? 'delete' : 'read', score: 0.2 + (round % 4) / 5, enabled: round % 3 !== 0 },
        ...(risky ? { dti: 0.95 } : {}),
      });
    }
    if (round === 5) await post('/exports/bundle', { since_seq: 0, until_seq: 40 });
  }
  const pending = (await call(url, 'GET', '/reviews?status=pending&limit=100')).body as { action_id: number }[];
  expect(pending.length).toBeGreaterThan(10);
  for (const [i, item] of pending.entries()) {
    await post(`/reviews/${item.action_id}`, { outcome: ['released', 'rejected', 'escalated', 'released'][i % 4], note: `n${i}` });
    if (i % 4 === 2 && i % 8 === 2) await post(`/reviews/${item.action_id}`, { outcome: 'rejected', note: 'after escalation' });
  }
  await call(url, 'PATCH', '/admin/agents/agent-2', { body: { is_active: false } });
  await post('/events/', { agent_id: 'agent-3', event_type: 'output_generated', payload: {} });
  await post('/exports/bundle', { since_seq: 1, until_seq: 10 });
  length = (await call(url, 'GET', '/audit/agent-3/verify')).body.length;
  await server.close();
}, 120_000);

afterAll(() => removeDir(dir));

/** A copy of a data dir without its checkpoints (a clean stop saved them), as on a first start. */
async function firstStartCopy(change?: (ledger: Database) => Promise<unknown>, from = dir): Promise<string> {
  const copy = tempDir();
  cpSync(from, copy, { recursive: true });
  const env = open({ path: copy, maxDbs: 32 });
  await env.openDB({ name: 'snapshots' }).clearAsync();
  await change?.(env.openDB({ name: 'ledger', encoding: 'binary' }));
  await env.close();
  return copy;
}

/** The state one replay over the whole ledger builds (the bus's path). */
function sequential(store: LmdbLedger): OrgRebuild {
  const directory = new AgentDirectory();
  const reviews = new ReviewQueue();
  const meter = new UsageMeter();
  const exports = new ExportLog();
  const writer = new OrgRecovery(POLICY_V1);
  const rows = [...store.range(ORG, 1)];
  for (let i = 0; i < rows.length; i += 100) {
    const chunk = rows.slice(i, i + 100);
    for (const consumer of [directory, reviews, meter, exports]) consumer.onCommitted(ORG, chunk);
    for (const row of chunk) writer.apply(row);
    writer.fence = chunk.at(-1)!.seq; // as a replay of the LMDB log sets it (its fence is the last seq)
  }
  return { writer: writer.snapshot(), directory: directory.snapshot(ORG)!, reviews: reviews.snapshot(ORG)!, meter: meter.snapshot(ORG)!, exports: exports.snapshot(ORG)! };
}

/** Orders what only order-free collections hold, and makes buffers comparable. */
function normal(state: OrgRebuild): unknown {
  const byId = <T>(pairs: [string | number, T][]) => [...pairs].sort(([a], [b]) => (a < b ? -1 : 1));
  return {
    ...state,
    writer: { ...state.writer, head: Buffer.from(state.writer.head).toString('hex'), agents: byId(state.writer.agents), held: byId(state.writer.held), closed: [...state.writer.closed].sort((a, b) => a - b) },
    directory: { ...state.directory, agents: [...state.directory.agents].sort((a, b) => (a.agent_id < b.agent_id ? -1 : 1)) },
    meter: { ...state.meter, months: state.meter.months.map(([m, u]) => [m, { ...u, agents: [...u.agents].sort() }]) },
  };
}

describe('partitioned start-up replay', () => {
  it.each([1, 2, 3])('cut into %i part(s) across threads, it builds what one replay builds', async (parts) => {
    const env = new LmdbEnv(dir, 'process');
    const store = new LmdbLedger(env);
    try {
      const expected = sequential(store);
      expect(expected.writer.lastSeq).toBe(length);
      expect(expected.reviews.open.length).toBeGreaterThan(0);
      expect(expected.reviews.decided.length).toBeGreaterThan(0);
      expect(expected.exports.exports).toHaveLength(2);
      expect(expected.writer.held.length + expected.writer.closed.length).toBeGreaterThan(10);
      const rebuilt = await replayPartitioned(store, [{ org: ORG, to: length }], POLICY_V1, { parts });
      expect(normal(rebuilt.get(ORG)!)).toEqual(normal(expected));
      // Open items oldest first and decisions in the order made, as the queue lists them.
      expect(rebuilt.get(ORG)!.reviews.open).toEqual(expected.reviews.open);
      expect(rebuilt.get(ORG)!.reviews.decided).toEqual(expected.reviews.decided);
    } finally {
      await env.close();
    }
  });

  it('a server started with it answers as one started with the one-pass replay', async () => {
    const [a, b] = [await firstStartCopy(), await firstStartCopy()];
    const base = { VIGIL_BASE_URL: 'http://vigil.test' };
    const logs: { msg: string; fields?: Record<string, unknown> }[] = [];
    const cut = await startServer(base, a, logs, { partitionedReplayFrom: 1, replay: { parts: 3 } });
    const one = await startServer(base, b, undefined, { partitionedReplayFrom: Number.POSITIVE_INFINITY });
    try {
      expect(logs.find((l) => l.msg === 'state rebuilt from the ledger')?.fields?.partitioned).toBe(1);
      const paths = [
        '/agents/agent-1',
        '/agents/agent-2',
        '/reviews?status=pending&limit=100',
        '/reviews?status=decided&limit=100',
        '/exports',
        `/billing/statement?month=${new Date().toISOString().slice(0, 7)}`,
        `/public/agents/${ORG}/agent-1`,
      ];
      for (const path of paths) {
        const key = path.startsWith('/public/') ? null : undefined;
        const [x, y] = [await call(cut.url, 'GET', path, { key }), await call(one.url, 'GET', path, { key })];
        expect(x.status, path).toBe(200);
        expect(x.body, path).toEqual(y.body);
      }
      // The writers hold the same state: the next event gets the same id and decision.
      const next = { agent_id: 'agent-5', event_type: 'config_read', payload: { key: 'password' }, dti: 0.4 };
      const [x, y] = [await call(cut.url, 'POST', '/events/', { body: next }), await call(one.url, 'POST', '/events/', { body: next })];
      expect(x.status).toBe(200);
      const strip = ({ ledger_seq, recorded_at, chain_hash, ...rest }: Record<string, unknown>) => rest;
      expect(strip(x.body)).toEqual(strip(y.body));
      expect((await call(cut.url, 'POST', '/agents/', { body: { agent_id: 'agent-0', name: 'again' } })).status).toBe(409);
      expect((await call(cut.url, 'GET', '/audit/agent-5/verify')).body.ok).toBe(true);
    } finally {
      await cut.close();
      await one.close();
      removeDir(a);
      removeDir(b);
    }
  });

  it('a ledger with a row missing falls back to the one-pass replay', async () => {
    const copy = await firstStartCopy((ledger) => ledger.remove([ORG, 7]));
    const logs: { msg: string; fields?: Record<string, unknown> }[] = [];
    const server = await startServer({}, copy, logs, { partitionedReplayFrom: 1, replay: { parts: 2 } });
    try {
      expect((logs.find((l) => l.msg === 'partitioned replay failed; replaying in one pass')?.fields?.err as { message?: string } | undefined)?.message).toMatch(/rows expected/);
      expect(logs.find((l) => l.msg === 'state rebuilt from the ledger')?.fields?.partitioned).toBe(0);
      expect((await call(server.url, 'GET', '/audit/agent-3/verify')).body.ok).toBe(false);
    } finally {
      await server.close();
      removeDir(copy);
    }
  });

  it('fails as a whole when a worker fails (the runtime then replays in one pass)', async () => {
    const env = new LmdbEnv(dir, 'process');
    const store = new LmdbLedger(env);
    try {
      // The worker opens the data dir it is given: one that does not exist.
      const elsewhere = Object.assign(Object.create(store) as LmdbLedger, { dir: `${dir}-missing` });
      await expect(replayPartitioned(elsewhere, [{ org: ORG, to: length }], POLICY_V1, { parts: 2 })).rejects.toThrow();
      // A worker that never answers is stopped once this thread's part is long done.
      const started = Date.now();
      await expect(replayPartitioned(store, [{ org: ORG, to: length }], POLICY_V1, { parts: 2, minWaitMs: 300, workerModule: '../test/support/silent-worker.ts' })).rejects.toThrow(/did not finish within/);
      expect(Date.now() - started).toBeLessThan(20_000);
      // A nonsensical part count is one part, not an empty state.
      const one = await replayPartitioned(store, [{ org: ORG, to: length }], POLICY_V1, { parts: 0 });
      expect(one.get(ORG)!.writer.agents).toHaveLength(24);
    } finally {
      await env.close();
      removeDir(`${dir}-missing`); // lmdb creates the directory before it finds no database there
    }
  });

  it('an org with an active webhook: its delivery cursor holds, nothing is delivered twice', async () => {
    const receiver = await startReceiver();
    const env = { VIGIL_WEBHOOK_ALLOW_PRIVATE: '1' };
    const first = await startServer(env);
    let copy = '';
    try {
      const hook = (await call(first.url, 'POST', '/webhooks', { body: { url: receiver.url(), events: ['gate.hold', 'gate.alert', 'gate.collapse'] } })).body;
      await call(first.url, 'POST', '/agents/', { body: { agent_id: 'w', name: 'W' } });
      const risky = { agent_id: 'w', event_type: 'output_generated', payload: {}, dti: 0.99 };
      for (let i = 0; i < 3; i++) expect((await call(first.url, 'POST', '/events/', { body: risky })).status).toBe(200);
      await waitFor(() => receiver.received.length === 3, 10_000, 'three deliveries');
      await first.close();
      copy = await firstStartCopy(undefined, first.dataDir);
      const logs: { msg: string; fields?: Record<string, unknown> }[] = [];
      const again = await startServer(env, copy, logs, { partitionedReplayFrom: 1, replay: { parts: 2 } });
      try {
        expect(logs.find((l) => l.msg === 'state rebuilt from the ledger')?.fields?.partitioned).toBe(1);
        // Deliveries are made during the replay, before the server listens: none was made again.
        expect((await call(again.url, 'GET', `/webhooks/${hook.id}/deliveries`)).body).toHaveLength(3);
        expect((await call(again.url, 'POST', '/events/', { body: risky })).status).toBe(200);
        expect((await call(again.url, 'GET', `/webhooks/${hook.id}/deliveries`)).body).toHaveLength(4);
        await waitFor(() => receiver.received.length === 4, 10_000, 'the fourth delivery');
      } finally {
        await again.close();
      }
    } finally {
      await receiver.close();
      removeDir(first.dataDir);
      if (copy !== '') removeDir(copy);
    }
  });
});
