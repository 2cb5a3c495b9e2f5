import { cpSync } from 'node:fs';
import { open } from 'lmdb';
import { describe, expect, it } from 'vitest';
import { call, parseLines, removeDir, spawnServer, startServer, tempDir } from '../support/server.js';

type Logs = { msg: string; fields?: Record<string, unknown> }[];
const checkpointsUsed = (logs: Logs): unknown => logs.find((l) => l.msg === 'state rebuilt from the ledger')?.fields?.checkpoints;

async function dropSnapshots(dir: string, mutate?: (value: any, key: string) => any): Promise<void> {
  const env = open({ path: dir, maxDbs: 16 });
  const snapshots = env.openDB<any, string>({ name: 'snapshots' });
  for (const key of [...snapshots.getKeys({})]) {
    if (mutate === undefined) await snapshots.remove(key);
    else await snapshots.put(key, mutate(snapshots.get(key), key));
  }
  await env.close();
}

const next = { agent_id: 'c', event_type: 'output_generated', payload: {}, dti: 0.3 };

describe('start-up checkpoints', () => {
  it('a clean stop saves them; a start from them equals a start from the whole ledger', async () => {
    const dir = tempDir();
    const copy = tempDir();
    try {
      const first = await startServer({}, dir);
      await call(first.url, 'POST', '/agents/', { body: { agent_id: 'c', name: 'C', observed: false } });
      await call(first.url, 'PATCH', '/admin/agents/c', { body: { public: true } });
      for (let i = 0; i < 6; i++) {
        await call(first.url, 'POST', '/events/', { body: { agent_id: 'c', event_type: i % 2 === 0 ? 'config_read' : 'output_generated', payload: { key: 'api_token' }, dti: 0.5 } });
      }
      await first.close();
      cpSync(dir, copy, { recursive: true });
      await dropSnapshots(copy);

      // One base URL for both: the records' verify_url would otherwise name each server's own port.
      const base = { VIGIL_BASE_URL: 'http://vigil.test' };
      const fromCheckpoint: Logs = [];
      const a = await startServer(base, dir, fromCheckpoint);
      const fromLedger: Logs = [];
      const b = await startServer(base, copy, fromLedger);
      try {
        expect(checkpointsUsed(fromCheckpoint)).toBe(5); // the org's writer and its projections: directory, review queue, meter, exports
        expect(checkpointsUsed(fromLedger)).toBe(0);
        const [ra, rb] = [await call(a.url, 'POST', '/events/', { body: next }), await call(b.url, 'POST', '/events/', { body: next })];
        expect(ra.status).toBe(200);
        expect(ra.body).toEqual(rb.body);
        const [pa, pb] = [await call(a.url, 'GET', '/public/agents/acme/c', { key: null }), await call(b.url, 'GET', '/public/agents/acme/c', { key: null })];
        // Equal but for what the new event's own time makes different.
        const strip = ({ last_event_at, ledger_head, ...rest }: Record<string, unknown>) => rest;
        expect(strip(pa.body)).toEqual(strip(pb.body));
        expect(pa.body.ledger_records).toBe(9);
        expect((await call(a.url, 'GET', '/audit/c/verify')).body.ok).toBe(true);
      } finally {
        await a.close();
        await b.close();
      }
    } finally {
      removeDir(dir);
      removeDir(copy);
    }
  });

  it('ignores a checkpoint that does not match the ledger', async () => {
    const dir = tempDir();
    try {
      const first = await startServer({}, dir);
      await call(first.url, 'POST', '/agents/', { body: { agent_id: 'c', name: 'C' } });
      await call(first.url, 'POST', '/events/', { body: next });
      await first.close();
      // A forged checkpoint claiming a different state at the same seq.
      await dropSnapshots(dir, (snap, key) =>
        key.startsWith('writer') ? { ...snap, chain: Buffer.alloc(32, 7), state: { ...snap.state, nextEventId: 999 } } : { ...snap, chain: Buffer.alloc(32, 7) },
      );
      const logs: Logs = [];
      const again = await startServer({}, dir, logs);
      try {
        expect(checkpointsUsed(logs)).toBe(0);
        const res = await call(again.url, 'POST', '/events/', { body: next });
        expect(res.body.event_id).toBe(2);
      } finally {
        await again.close();
      }
    } finally {
      removeDir(dir);
    }
  });
});

describe('periodic checkpoints', () => {
  it('bound the replay after kill -9: the restart seeds from them and continues correctly', async () => {
    const dir = tempDir();
    try {
      const proc = await spawnServer(dir, { VIGIL_CHECKPOINT_SECONDS: '1' });
      await call(proc.url, 'POST', '/agents/', { body: { agent_id: 'c', name: 'C' } });
      for (let i = 0; i < 5; i++) await call(proc.url, 'POST', '/events/', { body: next });
      // Wait for a periodic checkpoint, then write more that only the ledger holds.
      await new Promise((r) => setTimeout(r, 2500));
      for (let i = 0; i < 3; i++) await call(proc.url, 'POST', '/events/', { body: next });
      proc.child.kill('SIGKILL');
      await proc.exited;

      const again = await spawnServer(dir);
      try {
        const line = again.output().split('\n').find((l) => l.includes('state rebuilt from the ledger'))!;
        expect(JSON.parse(line).checkpoints).toBe(5);
        const res = await call(again.url, 'POST', '/events/', { body: next });
        expect(res.body.event_id).toBe(9);
        const rows = parseLines((await call(again.url, 'GET', '/audit/export')).text);
        expect(rows.length).toBe(10);
        expect((await call(again.url, 'GET', '/agents/c')).body.ledger_records).toBe(10);
      } finally {
        again.child.kill('SIGTERM');
        await again.exited;
      }
    } finally {
      removeDir(dir);
    }
  });
});

describe('the first checkpoint', () => {
  it('is saved soon after start, so a process that keeps crashing does not replay its whole ledger each time', async () => {
    const dir = tempDir();
    try {
      const first = await spawnServer(dir);
      await call(first.url, 'POST', '/agents/', { body: { agent_id: 'c', name: 'C' } });
      for (let i = 0; i < 5; i++) await call(first.url, 'POST', '/events/', { body: next });
      first.child.kill('SIGKILL');
      await first.exited;
      // Up for a moment after a replay of every row (VIGIL_CHECKPOINT_SECONDS is 60), then killed again.
      const second = await spawnServer(dir);
      const until = Date.now() + 20_000;
      const all = { directory: 6, exports: 6, meter: 6, reviews: 6, writer: 6 };
      while (JSON.stringify(await snapshotSeqs(dir)) !== JSON.stringify(all) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      expect(await snapshotSeqs(dir)).toEqual(all);
      second.child.kill('SIGKILL');
      await second.exited;
      const third = await spawnServer(dir);
      try {
        const line = third.output().split('\n').find((l) => l.includes('state rebuilt from the ledger'))!;
        expect(JSON.parse(line).checkpoints).toBe(5);
        expect((await call(third.url, 'POST', '/events/', { body: next })).body.event_id).toBe(6);
      } finally {
        third.child.kill('SIGTERM');
        await third.exited;
      }
    } finally {
      removeDir(dir);
    }
  });
});

/** The seq of each saved checkpoint of org acme, by consumer, read beside the running server. */
async function snapshotSeqs(dir: string): Promise<Record<string, unknown>> {
  const env = open({ path: dir, maxDbs: 32, readOnly: true });
  try {
    const snapshots = env.openDB<any, string>({ name: 'snapshots' });
    const out: Record<string, unknown> = {};
    for (const { key, value } of snapshots.getRange({})) if (key.endsWith('\u0000acme')) out[key.split('\u0000')[0]!] = value?.seq;
    return out;
  } finally {
    await env.close();
  }
}
