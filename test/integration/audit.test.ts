import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeModes, type ModeServers } from '../support/modes.js';
import { call, parseLines, removeDir, runCli, startServer, tempDir } from '../support/server.js';

describeModes('audit', (m) => {
  let server: ModeServers;
  const N = 30;

  beforeAll(async () => {
    server = await m.start();
    await call(server.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } });
    await call(server.url, 'POST', '/agents/', { body: { agent_id: 'b', name: 'B' } });
    for (let i = 0; i < N; i++) {
      await call(server.url, 'POST', '/events/', { body: { agent_id: i % 3 === 0 ? 'b' : 'a', event_type: 'config_read', payload: { i } } });
    }
  });
  afterAll(() => server.close());

  describe('GET /audit/export', () => {
    it('streams every record as JSON Lines with the documented fields, seq from 1 without gaps', async () => {
      const res = await call(server.readUrl, 'GET', '/audit/export');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('ndjson');
      const rows = parseLines(res.text);
      expect(rows.length).toBe(N + 2);
      rows.forEach((row, i) => {
        expect(Object.keys(row)).toEqual(['seq', 'kind', 'recorded_at', 'agent_id', 'body', 'content_hash', 'prev_hash', 'chain_hash']);
        expect(row.seq).toBe(i + 1);
        expect(row.recorded_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
        if (i > 0) expect(row.prev_hash).toBe(rows[i - 1].chain_hash);
      });
      expect(rows[0].prev_hash).toBe('0'.repeat(64));
    });

    it('takes since_seq exclusive and until_seq inclusive, and filters by agent_id', async () => {
      const window = parseLines((await call(server.readUrl, 'GET', '/audit/export?since_seq=5&until_seq=9')).text);
      expect(window.map((r) => r.seq)).toEqual([6, 7, 8, 9]);
      const onlyB = parseLines((await call(server.readUrl, 'GET', '/audit/export?agent_id=b')).text);
      expect(onlyB.length).toBe(1 + N / 3);
      expect(onlyB.every((r) => r.agent_id === 'b')).toBe(true);
      const beyond = parseLines((await call(server.readUrl, 'GET', '/audit/export?since_seq=30&until_seq=999')).text);
      expect(beyond.map((r) => r.seq)).toEqual([31, 32]);
    });

    it('refuses malformed windows with 400 naming the parameter', async () => {
      for (const [q, path] of [
        ['since_seq=-1', 'since_seq'],
        ['until_seq=abc', 'until_seq'],
        ['since_seq=9&until_seq=3', 'until_seq'],
        ['agent_id=bad%20id', 'agent_id'],
      ] as const) {
        const res = await call(server.readUrl, 'GET', `/audit/export?${q}`);
        expect(res.status, q).toBe(400);
        expect(res.body.error.details[0].path).toBe(path);
      }
    });

    it('needs a key', async () => {
      expect((await call(server.readUrl, 'GET', '/audit/export', { key: null })).status).toBe(401);
    });

    it('is verified offline by `vigil verify`, which names the first tampered seq', async () => {
      const text = (await call(server.readUrl, 'GET', '/audit/export')).text;
      const dir = tempDir();
      try {
        const good = join(dir, 'ledger.jsonl');
        writeFileSync(good, text);
        const ok = await runCli(['verify', good], {});
        expect(ok.code).toBe(0);
        expect(ok.stdout).toContain('OK');
        const tampered = join(dir, 'tampered.jsonl');
        writeFileSync(tampered, text.replace('{"i":7}', '{"i":8}'));
        const bad = await runCli(['verify', tampered], {});
        expect(bad.code).toBe(1);
        const report = JSON.parse(bad.stdout.split('\n')[0]!);
        expect(report.first_bad_seq).toBe(10);
      } finally {
        removeDir(dir);
      }
    });
  });

  describe('GET /audit/{agent_id}/verify', () => {
    it('recomputes the chain: ok, head equals the last chain_hash, length and agent record count', async () => {
      const rows = parseLines((await call(server.readUrl, 'GET', '/audit/export')).text);
      const res = await call(server.readUrl, 'GET', '/audit/b/verify');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ ok: true, head: rows.at(-1).chain_hash, length: N + 2, agent_records: 1 + N / 3, first_bad_seq: null });
    });

    it('says whether an earlier head is a prefix of today chain and at which seq', async () => {
      const rows = parseLines((await call(server.readUrl, 'GET', '/audit/export')).text);
      const earlier = rows[9].chain_hash;
      const yes = await call(server.readUrl, 'GET', `/audit/a/verify?head=${earlier}`);
      expect(yes.body.head_check).toEqual({ head: earlier, is_prefix: true, seq: 10 });
      const no = await call(server.readUrl, 'GET', `/audit/a/verify?head=${'ab'.repeat(32)}`);
      expect(no.body.head_check).toMatchObject({ is_prefix: false, seq: null });
      const bad = await call(server.readUrl, 'GET', '/audit/a/verify?head=xyz');
      expect(bad.status).toBe(400);
      expect(bad.body.error.details[0].path).toBe('head');
    });

    it('answers 404 for an unknown agent', async () => {
      expect((await call(server.readUrl, 'GET', '/audit/nobody/verify')).status).toBe(404);
    });
  });

  describe('tampering with the stored ledger', () => {
    m.embeddedOnly('it rewrites a row in the LMDB of one stopped process; in cluster mode that is a replica of the stream')('verifies an agent the directory does not know but the rows do (the replay stopped at an unreadable row)', async () => {
      const dir = tempDir();
      const s = await startServer({}, dir);
      try {
        await call(s.url, 'POST', '/agents/', { body: { agent_id: 't', name: 'T' } });
        for (let i = 0; i < 3; i++) await call(s.url, 'POST', '/events/', { body: { agent_id: 't', event_type: 'output_generated', payload: { i } } });
        await call(s.url, 'POST', '/agents/', { body: { agent_id: 'late', name: 'Late' } });
        await s.close();
        // Seq 3 made unreadable: the start-up replay stops there, so the directory never sees seq 5,
        // the agent's registration (as a node's directory that has not taken rows it holds).
        const env = open({ path: dir, maxDbs: 16 });
        const ledger = env.openDB<Buffer, [string, number]>({ name: 'ledger', encoding: 'binary' });
        const row = Buffer.from(ledger.get(['acme', 3])!);
        const at = row.indexOf('"i":1');
        expect(at).toBeGreaterThan(0);
        row.write('"i":}', at);
        await ledger.put(['acme', 3], row);
        // Without the checkpoints saved at the stop, which would restore the directory whole.
        await env.openDB({ name: 'snapshots' }).clearAsync();
        await env.close();
        const again = await startServer({}, dir);
        try {
          expect((await call(again.url, 'GET', '/agents/late')).status).toBe(404);
          // Found by its rows: the verification answers for it, and names the first bad seq.
          const res = await call(again.url, 'GET', '/audit/late/verify');
          expect(res.status).toBe(200);
          expect(res.body).toMatchObject({ ok: false, agent_id: 'late', first_bad_seq: 3, agent_records: 1 });
          expect((await call(again.url, 'GET', '/audit/nobody/verify')).status).toBe(404);
        } finally {
          await again.close();
        }
      } finally {
        removeDir(dir);
      }
    });

    m.embeddedOnly('it rewrites a row in the LMDB of one stopped process; in cluster mode that is a replica of the stream')('is detected by the verify route, which names the first bad seq', async () => {
      const dir = tempDir();
      const s = await startServer({}, dir);
      try {
        await call(s.url, 'POST', '/agents/', { body: { agent_id: 't', name: 'T' } });
        for (let i = 0; i < 5; i++) await call(s.url, 'POST', '/events/', { body: { agent_id: 't', event_type: 'output_generated', payload: { i } } });
        await s.close();
        // Rewrite seq 4 behind Vigil's back, as an attacker with disk access would.
        const env = open({ path: dir, maxDbs: 16 });
        const ledger = env.openDB<Buffer, [string, number]>({ name: 'ledger', encoding: 'binary' });
        const row = Buffer.from(ledger.get(['acme', 4])!);
        const at = row.indexOf('"i":2');
        expect(at).toBeGreaterThan(0);
        row.write('"i":9', at);
        await ledger.put(['acme', 4], row);
        await env.close();
        const again = await startServer({}, dir);
        try {
          const res = await call(again.url, 'GET', '/audit/t/verify');
          expect(res.body.ok).toBe(false);
          expect(res.body.first_bad_seq).toBe(4);
        } finally {
          await again.close();
        }
      } finally {
        removeDir(dir);
      }
    });
  });
});
