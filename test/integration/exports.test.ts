import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTarGz } from '../../src/bundle/tar.js';
import { describeModes, type ModeServers } from '../support/modes.js';
import { ADMIN_KEY, call, parseLines, removeDir, runCli, tempDir } from '../support/server.js';

describeModes('exports', (m) => {
  let server: ModeServers;
  let work: string;

  const ingest = (agent_id: string, dti: number | null = null) =>
    call(server.url, 'POST', '/events/', { body: { agent_id, event_type: 'output_generated', payload: {}, dti } });

  /** Writes a bundle's files into a directory, from the JSON answer. */
  function writeDir(name: string, files: Record<string, string>): string {
    const dir = join(work, name);
    mkdirSync(dir, { recursive: true });
    for (const [file, content] of Object.entries(files)) writeFileSync(join(dir, file), content);
    return dir;
  }

  beforeAll(async () => {
    server = await m.start();
    work = tempDir('vigil-exports-');
    await call(server.url, 'POST', '/agents/', { body: { agent_id: 'ok', name: 'OK' } });
    await call(server.url, 'POST', '/agents/', { body: { agent_id: 'bad', name: 'Bad' } });
    for (let i = 0; i < 5; i++) await ingest('ok');
    for (let i = 0; i < 3; i++) await ingest('bad', 0.99); // held actions
    const held = (await call(server.readUrl, 'GET', '/reviews', { key: ADMIN_KEY })).body as { action_id: number }[];
    await call(server.url, 'POST', `/reviews/${held[0]!.action_id}`, { body: { outcome: 'rejected', note: 'confirmed' } });
    // seqs: 1-2 agents, 3-7 ok events, 8-10 bad events, 11 review
  });
  afterAll(async () => {
    await server.close();
    removeDir(work);
  });

  describe('export bundles', () => {
    it('builds a bundle whose files, manifest and chain verify offline; the export is a ledger record', async () => {
      const res = await call(server.url, 'POST', '/exports/bundle', { body: { since_seq: 2, until_seq: 11 } });
      expect(res.status).toBe(200);
      const { export: record, manifest, files } = res.body;
      expect(Object.keys(files).sort()).toEqual(['cards.json', 'checkpoint.txt', 'incidents.jsonl', 'ledger.jsonl', 'manifest.json', 'manifest.sha256', 'merkle.json', 'oversight.jsonl']);
      // The log files (DESIGN §10): the checkpoint at until_seq, the range of the 2 records before the window.
      expect(files['checkpoint.txt']).toMatch(/^127\.0\.0\.1:\d+\/vigil\/acme\n11\n/);
      expect(JSON.parse(files['merkle.json'])).toMatchObject({ since_seq: 2, tree_size: 11, range: [{ level: 1, index: 0 }] });
      expect(manifest).toMatchObject({ org: 'acme', since_seq: 2, until_seq: 11, records: 9, agents: null });
      expect(manifest.policy_digests).toHaveLength(1);
      const lines = parseLines(files['ledger.jsonl']);
      expect(lines.map((l: any) => l.seq)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11]);
      expect(manifest.start_hash).toBe(parseLines((await call(server.readUrl, 'GET', '/audit/export?since_seq=1&until_seq=2')).text)[0].chain_hash);
      expect(manifest.end_hash).toBe(lines.at(-1).chain_hash);
      expect(parseLines(files['incidents.jsonl']).map((l: any) => l.agent_id)).toEqual(['bad', 'bad', 'bad']);
      expect(parseLines(files['oversight.jsonl'])).toMatchObject([{ outcome: 'rejected', note: 'confirmed', seq: 11 }]);
      expect(JSON.parse(files['cards.json']).map((c: any) => c.agent_id)).toEqual(['bad', 'ok']);

      // The export record: in the ledger (seq 12, kind export) and in GET /exports, newest first.
      expect(record).toMatchObject({ seq: 12, since_seq: 2, until_seq: 11, manifest_sha256: files['manifest.sha256'].slice(0, 64) });
      const exported = parseLines((await call(server.readUrl, 'GET', '/audit/export?since_seq=11')).text);
      expect(exported[0]).toMatchObject({ seq: 12, kind: 'export', agent_id: null, body: { manifest_sha256: record.manifest_sha256, since_seq: 2, until_seq: 11 } });
      const list = (await call(server.readUrl, 'GET', '/exports')).body;
      expect(list[0]).toEqual({ ...record, chain_hash: exported[0].chain_hash });
      expect(Object.keys(list[0])).toEqual(expect.arrayContaining(['seq', 'recorded_at', 'manifest_sha256', 'since_seq', 'until_seq', 'files', 'chain_hash']));

      const dir = writeDir('json-bundle', files);
      // The key as the node that built the bundle names it: the test's nodes have each their own
      // base URL, where a real cluster's share one (the key's name is its host).
      const vkey = (await call(server.url, 'GET', '/public/log-key', { key: null })).text;
      const ok = await runCli(['verify', dir, '--manifest-sha256', record.manifest_sha256, '--key', vkey], {});
      expect(ok.stdout + ok.stderr).toMatch(/bundle OK/);
      expect(ok.stdout).toContain('at size 11, signed by the key given');
      expect(ok.code).toBe(0);
      const verify = await call(server.readUrl, 'GET', '/audit/ok/verify');
      expect(verify.body.ok).toBe(true);
    });

    it('answers a .tar.gz for Accept: application/gzip; one changed byte in any file is rejected', async () => {
      const res = await fetch(`${server.url}/exports/bundle`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json', accept: 'application/gzip' },
        body: JSON.stringify({ since_seq: 0, until_seq: 6, agents: ['ok'] }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/gzip');
      const archive = Buffer.from(await res.arrayBuffer());
      const entries = readTarGz(archive);
      expect(entries.map((e) => e.name).sort()).toEqual(['cards.json', 'checkpoint.txt', 'incidents.jsonl', 'ledger.jsonl', 'manifest.json', 'manifest.sha256', 'merkle.json', 'oversight.jsonl']);
      const manifest = JSON.parse(entries.find((e) => e.name === 'manifest.json')!.content.toString());
      expect(manifest).toMatchObject({ since_seq: 0, until_seq: 6, agents: ['ok'], start_hash: '0'.repeat(64) });
      // The agents filter limits cards, never the ledger window.
      expect(JSON.parse(entries.find((e) => e.name === 'cards.json')!.content.toString()).map((c: any) => c.agent_id)).toEqual(['ok']);
      expect(entries.find((e) => e.name === 'ledger.jsonl')!.content.toString().trim().split('\n')).toHaveLength(6);

      const file = join(work, 'bundle.tar.gz');
      writeFileSync(file, archive);
      const ok = await runCli(['verify', file], {});
      expect(ok.code).toBe(0);

      const dir = writeDir('tgz-bundle', Object.fromEntries(entries.map((e) => [e.name, e.content.toString()])));
      for (const name of entries.map((e) => e.name)) {
        const original = readFileSync(join(dir, name));
        // One byte changed (or, in a file that is empty here, added).
        const changed = original.length === 0 ? Buffer.from('1') : Buffer.from(original);
        const at = name === 'ledger.jsonl' ? changed.indexOf('"recorded_at"') + 20 : Math.floor(changed.length / 2);
        if (original.length > 0) changed[at] = changed[at] === 0x31 ? 0x32 : 0x31;
        writeFileSync(join(dir, name), changed);
        const bad = await runCli(['verify', dir], {});
        expect(bad.code, name).toBe(1);
        expect(bad.stdout + bad.stderr, name).toContain(name);
        writeFileSync(join(dir, name), original);
      }
      expect((await runCli(['verify', dir], {})).code).toBe(0);
    });

    it('answers JSON when Accept refuses gzip (q=0) or ranks it below JSON', async () => {
      for (const accept of ['application/gzip;q=0', 'application/gzip; q=0.0, application/json', 'application/json, application/gzip;q=0.5', '*/*']) {
        const res = await fetch(`${server.url}/exports/bundle`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json', accept },
          body: JSON.stringify({ since_seq: 0, until_seq: 2 }),
        });
        expect(res.status, accept).toBe(200);
        expect(res.headers.get('content-type'), accept).toMatch(/^application\/json/);
        expect(((await res.json()) as any).manifest, accept).toMatchObject({ since_seq: 0, until_seq: 2 });
      }
    });

    it('lists past exports newest first', async () => {
      const made: number[] = [];
      for (const until_seq of [3, 4, 5]) {
        const res = await call(server.url, 'POST', '/exports/bundle', { body: { since_seq: 0, until_seq } });
        expect(res.status).toBe(200);
        made.push(res.body.export.seq);
      }
      const list = (await call(server.readUrl, 'GET', '/exports')).body as { seq: number; until_seq: number }[];
      expect(list.length).toBeGreaterThanOrEqual(5);
      const seqs = list.map((e) => e.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => b - a));
      expect(list.slice(0, 3).map((e) => [e.seq, e.until_seq])).toEqual([[made[2], 5], [made[1], 4], [made[0], 3]]);
    });

    it('exports up to the head when until_seq is left out', async () => {
      const head = parseLines((await call(server.readUrl, 'GET', '/audit/export')).text).at(-1).seq as number;
      const res = await call(server.url, 'POST', '/exports/bundle', { body: { since_seq: head - 3 } });
      expect(res.status).toBe(200);
      expect(res.body.manifest).toMatchObject({ since_seq: head - 3, until_seq: head, records: 3 });
      expect(res.body.export).toMatchObject({ seq: head + 1, since_seq: head - 3, until_seq: head });
      // The export record itself is the new head: a window starting there is empty, refused.
      const empty = await call(server.url, 'POST', '/exports/bundle', { body: { since_seq: head + 1 } });
      expect(empty.status).toBe(400);
      expect(empty.body.error.details[0]).toEqual({ path: 'since_seq', message: expect.stringMatching(/^must be below until_seq, which defaults to the ledger's last seq, \d+$/) });
    });

    it('refuses a bad window or unknown agents with 400, writing nothing', async () => {
      const before = (await call(server.readUrl, 'GET', '/exports')).body.length;
      const cases: [unknown, string][] = [
        [{ since_seq: 5, until_seq: 5 }, 'since_seq'],
        [{ since_seq: 6, until_seq: 2 }, 'since_seq'],
        [{ since_seq: 0, until_seq: 10_000 }, 'until_seq'],
        [{ since_seq: -1, until_seq: 3 }, 'since_seq'],
        [{ until_seq: 3 }, 'since_seq'],
        [{ since_seq: 10_000 }, 'since_seq'],
        [{ since_seq: 0, until_seq: null }, 'until_seq'],
        [{ since_seq: 0, until_seq: 3, agents: ['ghost'] }, 'agents.0'],
        [{ since_seq: 0, until_seq: 3, extra: 1 }, 'extra'],
      ];
      for (const [body, path] of cases) {
        const res = await call(server.url, 'POST', '/exports/bundle', { body });
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(res.body.error.details.map((d: any) => d.path), JSON.stringify(body)).toContain(path);
      }
      expect((await call(server.readUrl, 'GET', '/exports')).body.length).toBe(before);
      expect((await call(server.url, 'POST', '/exports/bundle', { key: null, body: { since_seq: 0, until_seq: 1 } })).status).toBe(401);
    });
  });
});
