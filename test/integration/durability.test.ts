import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifyReceipt, type Receipt } from '../../src/client/index.js';
import { ChainVerifier, leafInput, rowFromExport } from '../../src/domain/ledger.js';
import { leafHash, MemoryTree, rootAt } from '../../src/domain/merkle.js';
import { verifyConsistency } from '../../src/domain/merkle-verify.js';
import { openNote, parseCheckpoint, parseVerifierKey, verifierKey, type Checkpoint } from '../../src/domain/signed-note.js';
import { call, parseLines, removeDir, spawnServer, startServer, tempDir } from '../support/server.js';

function verifyRows(rows: any[]) {
  const verifier = new ChainVerifier();
  for (const row of rows) verifier.push(rowFromExport(row));
  return verifier.report();
}

describe('restart', () => {
  it('continues the same chain, ids and agent state after a clean restart', async () => {
    const parent = tempDir();
    // A dot in the dir's name once made lmdb-js take the dir for a file name.
    const dir = join(parent, 'data.v1');
    try {
      const first = await startServer({}, dir);
      await call(first.url, 'POST', '/agents/', { body: { agent_id: 'r', name: 'R' } });
      let last: any;
      for (let i = 0; i < 3; i++) {
        last = (await call(first.url, 'POST', '/events/', { body: { agent_id: 'r', event_type: 'output_generated', payload: {}, dti: 0.95 } })).body;
      }
      const headBefore = (await call(first.url, 'GET', '/audit/r/verify')).body.head;
      await first.close();

      const second = await startServer({}, dir);
      try {
        const dup = await call(second.url, 'POST', '/agents/', { body: { agent_id: 'r', name: 'R' } });
        expect(dup.status).toBe(409);
        const next = (await call(second.url, 'POST', '/events/', { body: { agent_id: 'r', event_type: 'output_generated', payload: {}, dti: 0.95 } })).body;
        expect(next.event_id).toBe(last.event_id + 1);
        // Scoring state survived: the BII keeps falling from where it was, not from a fresh agent.
        expect(next.bii).toBeLessThan(last.bii);
        const rows = parseLines((await call(second.url, 'GET', '/audit/export')).text);
        expect(rows.length).toBe(5);
        expect(rows[4].prev_hash).toBe(headBefore);
        expect(verifyRows(rows).ok).toBe(true);
        const verify = await call(second.url, 'GET', `/audit/r/verify?head=${headBefore}`);
        expect(verify.body.ok).toBe(true);
        expect(verify.body.head_check).toMatchObject({ is_prefix: true, seq: 4 });
        expect(existsSync(join(dir, 'data.mdb'))).toBe(true);
      } finally {
        await second.close();
      }
    } finally {
      removeDir(parent);
    }
  });
});

describe('kill -9 under concurrent load', () => {
  it('keeps every acknowledged event, and the chain verifies and continues after restart', async () => {
    const dir = tempDir();
    try {
      const proc = await spawnServer(dir);
      const agents = ['k0', 'k1', 'k2', 'k3'];
      for (const agent_id of agents) await call(proc.url, 'POST', '/agents/', { body: { agent_id, name: agent_id } });

      const acked = new Map<number, { agent_id: string; gate_status: string; bii: number; n: number; receipt: Receipt }>();
      let stop = false;
      let sent = 0;
      const worker = async (w: number): Promise<void> => {
        for (let n = 0; !stop; n++) {
          const agent_id = agents[w % agents.length]!;
          sent++;
          try {
            // Every fourth with a receipt: the log's promise must survive the kill too.
            const res = await call(proc.url, 'POST', '/events/', {
              body: { agent_id, event_type: 'file_operation', payload: { operation: 'write', path: `/w/${w}/${n}`, worker: w, n } },
              ...(n % 4 === 0 ? { headers: { prefer: 'receipt' } } : {}),
            });
            if (res.status === 200) acked.set(res.body.event_id, { agent_id, gate_status: res.body.gate_status, bii: res.body.bii, n, receipt: res.body.receipt });
          } catch {
            return; // the connection died with the server
          }
        }
      };
      const workers = Array.from({ length: 16 }, (_, w) => worker(w));
      // Kill once a good number of events are acknowledged, while requests are in flight.
      const deadline = Date.now() + 20_000;
      // A checkpoint signed mid-load, as a monitor would have seen it.
      const key = parseVerifierKey((await call(proc.url, 'GET', '/public/log-key', { key: null })).text)!;
      let seen: Checkpoint | null = null;
      while ((acked.size < 1500 || seen === null) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
        if (acked.size > 500 && seen === null) {
          const note = await call(proc.url, 'GET', '/audit/checkpoint');
          if (note.status === 200) seen = parseCheckpoint(openNote(note.text, key) ?? '');
        }
      }
      proc.child.kill('SIGKILL');
      await proc.exited;
      stop = true;
      await Promise.all(workers);
      expect(acked.size).toBeGreaterThan(100);
      expect(sent).toBeGreaterThan(acked.size);

      const again = await spawnServer(dir);
      try {
        const rows = parseLines((await call(again.url, 'GET', '/audit/export')).text);
        const report = verifyRows(rows);
        expect(report.ok).toBe(true);
        const events = new Map<number, any>();
        for (const row of rows) if (row.kind === 'event') events.set(row.body.event_id, row);
        for (const [eventId, ack] of acked) {
          const row = events.get(eventId);
          expect(row, `acknowledged event ${eventId} missing`).toBeDefined();
          expect(row.agent_id).toBe(ack.agent_id);
          expect(row.body.gate_status).toBe(ack.gate_status);
          expect(row.body.bii).toBe(ack.bii);
          expect(row.body.payload.n).toBe(ack.n);
          if (ack.receipt !== undefined) {
            expect(verifyReceipt(ack.receipt, verifierKey(key))).toBe(true);
            expect(ack.receipt.leaf_hash).toBe(leafHash(leafInput(rowFromExport(row))).toString('hex'));
          }
        }
        expect([...acked.values()].filter((a) => a.receipt !== undefined).length).toBeGreaterThan(20);
        // The log after the kill: its tree caught up from the ledger, its new checkpoint extends the
        // one signed before the kill, and its root is the one the export makes.
        expect(seen).not.toBeNull();
        const tree = new MemoryTree();
        for (const row of rows) tree.append(leafHash(leafInput(rowFromExport(row))));
        // The same key under the same name, though the restarted server listens on another port.
        const keyAgain = parseVerifierKey((await call(again.url, 'GET', '/public/log-key', { key: null })).text)!;
        expect(verifierKey(keyAgain)).toBe(verifierKey(key));
        let now: Checkpoint | null = null;
        await expect
          .poll(async () => {
            const note = await call(again.url, 'GET', '/audit/checkpoint');
            now = note.status === 200 ? parseCheckpoint(openNote(note.text, keyAgain) ?? '') : null;
            return now?.size ?? 0;
          }, { timeout: 10_000, interval: 100 })
          .toBe(rows.length);
        expect(now!.root.equals(rootAt(tree))).toBe(true);
        const proof = await call(again.url, 'GET', `/audit/proof/consistency?from=${seen!.size}&to=${rows.length}`);
        expect(verifyConsistency(seen!.size, rows.length, seen!.root, now!.root, proof.body.hashes.map((h: string) => Buffer.from(h, 'hex')))).toBe(true);
        const next = await call(again.url, 'POST', '/events/', { body: { agent_id: 'k0', event_type: 'output_generated', payload: {} } });
        expect(next.status).toBe(200);
        const after = parseLines((await call(again.url, 'GET', `/audit/export?since_seq=${rows.length}`)).text);
        expect(after.length).toBe(1);
        expect(after[0].seq).toBe(rows.length + 1);
        expect(after[0].prev_hash).toBe(report.head);
        expect(next.body.event_id).toBe(Math.max(...events.keys()) + 1);
      } finally {
        again.child.kill('SIGTERM');
        await again.exited;
      }
    } finally {
      removeDir(dir);
    }
  });
});

describe('first start', () => {
  it('creates org default and prints an admin key once, which works; a restart prints none', async () => {
    const dir = tempDir();
    try {
      const env = { VIGIL_BOOTSTRAP_ORG: '', VIGIL_BOOTSTRAP_KEY: '' };
      const first = await spawnServer(dir, env);
      const key = /vgl_[A-Za-z0-9_-]{43}/.exec(first.output())?.[0];
      expect(key).toBeDefined();
      const me = await call(first.url, 'GET', '/orgs/me', { key: key! });
      expect(me.body.slug).toBe('default');
      expect(me.body.key.scopes).toEqual(['events:write', 'review', 'admin', 'audit:read']);
      first.child.kill('SIGTERM');
      await first.exited;
      const second = await spawnServer(dir, env);
      expect(second.output()).not.toMatch(/vgl_/);
      expect((await call(second.url, 'GET', '/orgs/me', { key: key! })).status).toBe(200);
      second.child.kill('SIGTERM');
      await second.exited;
    } finally {
      removeDir(dir);
    }
  });
});

describe('overload', () => {
  it('answers 429 with Retry-After past VIGIL_MAX_PENDING and records only what it acknowledged', async () => {
    const s = await startServer({ VIGIL_MAX_PENDING: '1' });
    try {
      await call(s.url, 'POST', '/agents/', { body: { agent_id: 'o', name: 'O' } });
      const results = await Promise.all(
        Array.from({ length: 60 }, (_, i) => call(s.url, 'POST', '/events/', { body: { agent_id: 'o', event_type: 'output_generated', payload: { i } } })),
      );
      const ok = results.filter((r) => r.status === 200);
      const limited = results.filter((r) => r.status === 429);
      expect(ok.length + limited.length).toBe(60);
      expect(limited.length).toBeGreaterThan(0);
      expect(limited[0]!.body.error.code).toBe('overloaded');
      expect(limited[0]!.headers.get('retry-after')).toBe('1');
      const rows = parseLines((await call(s.url, 'GET', '/audit/export')).text);
      expect(rows.filter((r) => r.kind === 'event').length).toBe(ok.length);
    } finally {
      await s.close();
      removeDir(s.dataDir);
    }
  });

  it('refuses whole batches past VIGIL_MAX_PENDING (429, nothing of them taken), and a batch is recorded in order or cut short, never with a hole', async () => {
    const s = await startServer({ VIGIL_MAX_PENDING: '2000' });
    try {
      await call(s.url, 'POST', '/agents/', { body: { agent_id: 'o', name: 'O' } });
      const batch = (b: number) => ({ events: Array.from({ length: 1000 }, (_, i) => ({ agent_id: 'o', event_type: 'output_generated', payload: { b, i } })) });
      const results = await Promise.all(Array.from({ length: 20 }, (_, b) => call(s.url, 'POST', '/events/batch', { body: batch(b) })));
      const taken = results.filter((r) => r.status === 200);
      const refused = results.filter((r) => r.status === 429);
      expect(taken.length + refused.length).toBe(20);
      expect(refused.length).toBeGreaterThan(0);
      expect(refused[0]!.body.error.code).toBe('overloaded');
      expect(refused[0]!.headers.get('retry-after')).toBe('1');
      let recorded = 0;
      for (const r of taken) {
        const outcomes = r.body.results as { event_id?: number; error?: { code: string } }[];
        // Accepted events first, then (if any) refusals to the end: never an event recorded after a refused one.
        const firstRefused = outcomes.findIndex((o) => o.error !== undefined);
        if (firstRefused !== -1) expect(outcomes.slice(firstRefused).every((o) => o.error !== undefined)).toBe(true);
        const ids = outcomes.filter((o) => o.event_id !== undefined).map((o) => o.event_id!);
        expect(ids).toEqual([...ids].sort((x, y) => x - y));
        recorded += ids.length;
      }
      const rows = parseLines((await call(s.url, 'GET', '/audit/export')).text);
      expect(rows.filter((r) => r.kind === 'event').length).toBe(recorded);
    } finally {
      await s.close();
      removeDir(s.dataDir);
    }
  });

  it('keeps a batch in order when the writer refuses part of it: the refused events are a suffix', async () => {
    // The writer's own bound (below a slice's 128 events the slice shrinks to fit), with single
    // events filling its queue while the batch goes in slices.
    const s = await startServer({ VIGIL_MAX_PENDING: '200' });
    try {
      await call(s.url, 'POST', '/agents/', { body: { agent_id: 'o', name: 'O' } });
      const one = (i: number) => call(s.url, 'POST', '/events/', { body: { agent_id: 'o', event_type: 'output_generated', payload: { i } } });
      const singles = Array.from({ length: 400 }, (_, i) => one(i));
      const batch = await call(s.url, 'POST', '/events/batch', { body: { events: Array.from({ length: 1000 }, (_, i) => ({ agent_id: 'o', event_type: 'output_generated', payload: { i } })) } });
      await Promise.all(singles);
      if (batch.status === 200) {
        const outcomes = batch.body.results as { event_id?: number; error?: unknown }[];
        const firstRefused = outcomes.findIndex((o) => o.error !== undefined);
        if (firstRefused !== -1) expect(outcomes.slice(firstRefused).every((o) => o.error !== undefined)).toBe(true);
      } else {
        expect(batch.status).toBe(429);
      }
    } finally {
      await s.close();
      removeDir(s.dataDir);
    }
  });
});
