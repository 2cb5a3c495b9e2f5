import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, removeDir, runCli, startServer, tempDir, type TestServer } from '../support/server.js';
import { withWriter } from '../support/writer.js';

// Issue 13, item 6: a ledger row whose bytes no longer parse refuses writes to its org with 503
// `ledger_damaged` naming the seq, logged once at start; other orgs and every read keep working.

const dir = tempDir('vigil-damaged-');
let server: TestServer;
let otherKey: string;
const logs: { msg: string; fields?: Record<string, unknown> }[] = [];

type RawLedger = ReturnType<typeof rawLedger>;
const rawLedger = (env: ReturnType<typeof open>) => env.openDB<Buffer, [string, number]>({ name: 'ledger', encoding: 'binary', cache: false });

/** Breaks the JSON of one stored row (its last `}` becomes `x`), as a flipped bit on disk would. */
function breakRow(ledger: RawLedger, org: string, seq: number): void {
  const value = Buffer.from(ledger.get([org, seq])!);
  value[value.lastIndexOf('}'.charCodeAt(0))] = 'x'.charCodeAt(0);
  ledger.putSync([org, seq], value);
}

/** Breaks a row of a stopped server's data dir, and drops the checkpoints that would skip it. */
async function damageRow(dataDir: string, org: string, seq: number): Promise<void> {
  const env = open({ path: dataDir, noSubdir: false, maxDbs: 32 });
  breakRow(rawLedger(env), org, seq);
  // Without checkpoints, the start replays every row (as after a kill -9 on a first run).
  const snapshots = env.openDB({ name: 'snapshots' });
  for (const key of snapshots.getKeys({})) snapshots.removeSync(key);
  await env.close();
}

const event = (agent: string, i: number) => ({ agent_id: agent, event_type: 'output_generated', payload: { i } });

beforeAll(async () => {
  const first = await startServer({}, dir);
  otherKey = (await runCli(['keys', 'create', '--org', 'globex', '--scopes', 'events:write,admin'], { VIGIL_DATA_DIR: dir })).stdout.trim().split('\n').at(-1)!;
  await call(first.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } });
  await call(first.url, 'PATCH', '/admin/agents/a', { body: { public: true } });
  await call(first.url, 'POST', '/agents/', { key: otherKey, body: { agent_id: 'g', name: 'G' } });
  for (let i = 0; i < 4; i++) {
    expect((await call(first.url, 'POST', '/events/', { body: event('a', i) })).status).toBe(200);
    expect((await call(first.url, 'POST', '/events/', { key: otherKey, body: event('g', i) })).status).toBe(200);
  }
  await first.close();
  await damageRow(dir, 'acme', 4);
  server = await startServer({}, dir, logs);
});
afterAll(async () => {
  await server.close();
  removeDir(dir);
});

describe('a damaged ledger row', () => {
  it('is logged once at start with its org and seq', () => {
    const lines = logs.filter((l) => l.msg.startsWith('ledger damaged'));
    expect(lines).toEqual([{ msg: expect.any(String), fields: { org: 'acme', seq: 4 } }]);
  });

  it('refuses every write to its org with 503 ledger_damaged naming the seq', async () => {
    for (const [method, path, body] of [
      ['POST', '/events/', event('a', 9)],
      ['POST', '/agents/', { agent_id: 'b', name: 'B' }],
      ['PATCH', '/admin/agents/a', { public: false }],
    ] as const) {
      const res = await call(server.url, method, path, { body });
      expect(res.status, path).toBe(503);
      expect(res.body.error.code).toBe('ledger_damaged');
      expect(res.body.error.message).toContain('seq 4');
    }
  });

  it('keeps other orgs writing and every read of its org working', async () => {
    const other = await call(server.url, 'POST', '/events/', { key: otherKey, body: event('g', 9) });
    expect(other.status).toBe(200);
    expect(other.body.event_id).toBe(5);
    expect((await call(server.url, 'GET', '/agents/a')).status).toBe(200);
    expect((await call(server.url, 'GET', '/public/agents/acme/a', { key: null })).status).toBe(200);
    const verify = await call(server.url, 'GET', '/audit/a/verify');
    expect(verify.status).toBe(200);
    expect(verify.body).toMatchObject({ ok: false, first_bad_seq: 4 });
    expect((await call(server.url, 'GET', '/health')).status).toBe(200);
  });
});

describe('reading the ledger past a damaged row', () => {
  // acme's rows: 1 agent a, 2 its update, 3-6 events; row 4 is damaged.
  const trailer = {
    error: {
      code: 'ledger_damaged',
      message: expect.stringContaining('cannot be read at seq 4'),
      details: [{ path: 'ledger.4', message: 'this row cannot be read' }],
    },
  };

  it('GET /audit/export serves the rows before it, then one trailer line, and nothing after', async () => {
    for (const query of ['', '?agent_id=a', '?since_seq=1&until_seq=6']) {
      const res = await call(server.url, 'GET', `/audit/export${query}`);
      expect(res.status, query).toBe(200);
      expect(res.text.endsWith('}\n'), query).toBe(true);
      const lines = res.text.trimEnd().split('\n').map((line) => JSON.parse(line));
      expect(lines.slice(0, -1).map((r) => r.seq), query).toEqual(query === '' || query === '?agent_id=a' ? [1, 2, 3] : [2, 3]);
      expect(lines.at(-1), query).toEqual(trailer);
    }
  });

  it('answers 503 ledger_damaged when the damaged row comes before any record', async () => {
    for (const query of ['?since_seq=3', '?since_seq=3&until_seq=4', '?since_seq=2&agent_id=nobody']) {
      const res = await call(server.url, 'GET', `/audit/export${query}`);
      expect(res.status, query).toBe(503);
      expect(res.headers.get('content-type'), query).toContain('application/json');
      expect(res.headers.get('retry-after'), query).toBeNull();
      expect(res.body, query).toEqual(trailer);
    }
  });

  it('serves a window that ends before it whole, with no trailer', async () => {
    const res = await call(server.url, 'GET', '/audit/export?until_seq=3');
    expect(res.status).toBe(200);
    expect(res.text.trimEnd().split('\n').map((line) => JSON.parse(line).seq)).toEqual([1, 2, 3]);
  });

  it('refuses an export bundle of the org: past the row 400, before it 503 when the export is recorded', async () => {
    const past = await call(server.url, 'POST', '/exports/bundle', { body: { since_seq: 0, until_seq: 6 } });
    expect(past.status).toBe(400);
    expect(past.body.error.details).toEqual([{ path: 'until_seq', message: "beyond the ledger, whose last seq is 3" }]);
    const before = await call(server.url, 'POST', '/exports/bundle', { body: { since_seq: 0 } });
    expect(before.status).toBe(503);
    expect(before.body.error.code).toBe('ledger_damaged');
  });

  it('refuses an export bundle over a row damaged while the server runs with 503 ledger_damaged', async () => {
    // Damaged at start, the row ends the org's projected ledger: a bundle never reaches it then.
    const other = tempDir('vigil-damaged-');
    const running = await startServer({}, other);
    try {
      await call(running.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } });
      for (let i = 0; i < 3; i++) expect((await call(running.url, 'POST', '/events/', { body: event('a', i) })).status).toBe(200);
      // A second handle on the server's environment (left open: closing it would close the server's).
      breakRow(rawLedger(open({ path: other, noSubdir: false, maxDbs: 32 })), 'acme', 3);
      const res = await call(running.url, 'POST', '/exports/bundle', { body: { since_seq: 0, until_seq: 4 } });
      expect(res.status).toBe(503);
      expect(res.body.error).toEqual({ ...trailer.error, message: expect.stringContaining('cannot be read at seq 3'), details: [{ path: 'ledger.3', message: 'this row cannot be read' }] });
      expect((await call(running.url, 'GET', '/exports')).body).toEqual([]);
    } finally {
      await running.close();
      removeDir(other);
    }
  });

  it('vigil verify of the cut export fails at the damaged seq, naming the trailer', async () => {
    const file = join(dir, 'export.jsonl');
    writeFileSync(file, (await call(server.url, 'GET', '/audit/export')).text);
    const run = await runCli(['verify', file], {});
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout.split('\n')[0]!)).toMatchObject({ ok: false, first_bad_seq: 4, problem: expect.stringContaining('the export ended with an error: ledger_damaged') });
  });
});

describe('a row whose encoding is damaged', () => {
  it('does not stop the service from starting: its org is refused writes naming the right seq', async () => {
    const other = tempDir('vigil-damaged-');
    try {
      const first = await startServer({}, other);
      await call(first.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } });
      for (let i = 0; i < 3; i++) await call(first.url, 'POST', '/events/', { body: event('a', i) });
      await first.close();
      // The first byte of row 2 is the encoding version.
      const env = open({ path: other, noSubdir: false, maxDbs: 32 });
      const ledger = env.openDB<Buffer, [string, number]>({ name: 'ledger', encoding: 'binary', cache: false });
      const value = Buffer.from(ledger.get(['acme', 2])!);
      value[0] = 9;
      ledger.putSync(['acme', 2], value);
      const snapshots = env.openDB({ name: 'snapshots' });
      for (const key of snapshots.getKeys({})) snapshots.removeSync(key);
      await env.close();
      const logs: { msg: string; fields?: Record<string, unknown> }[] = [];
      const again = await startServer({}, other, logs);
      try {
        expect(logs.filter((l) => l.msg.startsWith('ledger damaged')).map((l) => l.fields)).toEqual([{ org: 'acme', seq: 2 }]);
        const res = await call(again.url, 'POST', '/events/', { body: event('a', 9) });
        expect(res.status).toBe(503);
        expect(res.body.error).toMatchObject({ code: 'ledger_damaged', message: expect.stringContaining('seq 2') });
        // The hashed content of the row is intact (the version byte is not hashed): verification answers.
        expect((await call(again.url, 'GET', '/audit/a/verify')).status).toBe(200);
        // It cannot be read all the same: the export stops before it.
        const exported = (await call(again.url, 'GET', '/audit/export')).text.trimEnd().split('\n').map((line) => JSON.parse(line));
        expect(exported.map((r) => r.seq ?? r.error.details[0].path)).toEqual([1, 'ledger.2']);
        expect((await call(again.url, 'GET', '/health')).status).toBe(200);
      } finally {
        await again.close();
      }
    } finally {
      removeDir(other);
    }
  });
});

describe('a writer that must rebuild past a damaged row', () => {
  it('refuses every write with ledger_damaged instead of retrying for ever', async () => {
    await withWriter(async ({ dir: writerDir, ingest }) => {
      for (let i = 0; i < 3; i++) expect((await ingest({ i })).ok).toBe(true);
      // Row 2 breaks on disk while the writer runs; a command it cannot plan makes it rebuild.
      // A second handle on the same environment (left open: closing it would close the store's).
      breakRow(rawLedger(open({ path: writerDir, noSubdir: false, maxDbs: 32 })), 'o', 2);
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      expect(await ingest(cyclic)).toMatchObject({ ok: false, code: 'internal' });
      expect(await ingest({ i: 9 })).toMatchObject({ ok: false, code: 'ledger_damaged', message: expect.stringContaining('seq 2') });
      expect(await ingest({ i: 10 })).toMatchObject({ ok: false, code: 'ledger_damaged' });
    });
  });
});
