import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VigilClient, VigilClientError, type IngestResult } from '../../src/client/index.js';
import { freePorts } from '../support/nats.js';
import { ADMIN_KEY, call, parseLines, removeDir, spawnServer, tempDir, type ServerProcess } from '../support/server.js';

/** The runtime client against a real server process: the stream, the HTTP fallback, a server killed mid-stream. */
describe('VigilClient', () => {
  let dir: string;
  let port: number;
  let server: ServerProcess;
  const start = async (): Promise<void> => {
    // A small per-org queue: the client's frames overrun it, and the events refused `overloaded` are sent again.
    server = await spawnServer(dir, { VIGIL_PORT: String(port), VIGIL_MAX_PENDING: '300' });
  };
  const event = (n: number) => ({ agent_id: 'runtime-bot', event_type: 'output_generated' as const, payload: { n } });
  const rows = async (): Promise<any[]> => parseLines((await call(server.url, 'GET', '/audit/export')).text);

  beforeAll(async () => {
    dir = tempDir('vigil-client-');
    [port] = (await freePorts(1)) as [number];
    await start();
    expect((await call(server.url, 'POST', '/agents/', { body: { agent_id: 'runtime-bot', name: 'Runtime' } })).status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await server?.exited;
    removeDir(dir);
  });

  it('streams events in frames and resolves each with its own result (events refused overloaded are sent again); close() waits for every answer', async () => {
    const before = (await rows()).length;
    const client = new VigilClient({ url: server.url, key: ADMIN_KEY, maxBatch: 100, lingerMs: 2 });
    const results = await Promise.all(Array.from({ length: 1000 }, (_, n) => client.ingest(event(n))));
    await client.close();
    expect(results.every((r) => typeof r.event_id === 'number' && typeof r.gate_status === 'string')).toBe(true);
    const ids = results.map((r) => r.event_id);
    expect(new Set(ids).size).toBe(1000);
    const after = await rows();
    expect(after.length).toBe(before + 1000);
    // Every event went with a key the client gave it.
    expect(after.slice(before).every((r) => typeof r.body.idempotency_key === 'string')).toBe(true);
    await expect(client.ingest(event(0))).rejects.toMatchObject({ code: 'closed' });
  });

  it('rejects a refused event alone, with the server\'s code', async () => {
    const client = new VigilClient({ url: server.url, key: ADMIN_KEY, encoding: 'msgpack' });
    const [ok, unknown] = await Promise.allSettled([client.ingest(event(1)), client.ingest({ ...event(2), agent_id: 'nobody' })]);
    await client.close();
    expect(ok.status).toBe('fulfilled');
    expect(unknown).toMatchObject({ status: 'rejected', reason: { code: 'not_found' } });
    expect((unknown as PromiseRejectedResult).reason).toBeInstanceOf(VigilClientError);
  });

  it('over HTTP batches (transport http) gives the same results', async () => {
    const client = new VigilClient({ url: server.url, key: ADMIN_KEY, transport: 'http', maxBatch: 50 });
    const results = await Promise.all(Array.from({ length: 120 }, (_, n) => client.ingest(event(n))));
    await client.close();
    expect(new Set(results.map((r) => r.event_id)).size).toBe(120);
  });

  it('a bad key is refused at once, for every event', async () => {
    const client = new VigilClient({ url: server.url, key: 'vgl_not-a-key' });
    await expect(client.ingest(event(1))).rejects.toMatchObject({ code: 'unauthorized' });
    await client.close();
  });

  it('refuses at once an event too large for any frame (counted in UTF-8 bytes), and sends one just under the limit alone', async () => {
    const client = new VigilClient({ url: server.url, key: ADMIN_KEY, maxBatch: 10 });
    // 400k characters of three UTF-8 bytes each: 1.2 MB, though .length says 0.4M.
    await expect(client.ingest({ ...event(400_000), payload: { text: '€'.repeat(400_000) } })).rejects.toMatchObject({ code: 'payload_too_large' });
    const big = client.ingest({ ...event(400_001), payload: { text: '€'.repeat(300_000) } }); // 0.9 MB: alone in its frame
    const small = Array.from({ length: 5 }, (_, n) => client.ingest(event(400_002 + n)));
    expect(typeof (await big).event_id).toBe('number');
    expect((await Promise.all(small)).every((r) => typeof r.event_id === 'number')).toBe(true);
    await client.close({ timeoutMs: 10_000 });
  });

  it('transport auto: behind a proxy that does not speak WebSocket (the upgrade answered 404), it falls back to POST /events/batch', async () => {
    // A real HTTP proxy in front of the server: it forwards POSTs and answers anything else 404, upgrades included.
    let batches = 0;
    const proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        if (req.method !== 'POST') return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"code":"not_found","message":"no such route"}}');
        if (req.url === '/events/batch') batches++;
        void fetch(`${server.url}${req.url}`, { method: 'POST', headers: { authorization: String(req.headers.authorization), 'content-type': 'application/json' }, body: Buffer.concat(chunks) }).then(async (answer) => {
          res.writeHead(answer.status, { 'content-type': 'application/json' }).end(Buffer.from(await answer.arrayBuffer()));
        });
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const client = new VigilClient({ url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, key: ADMIN_KEY, maxBatch: 20 });
      const results = await Promise.all(Array.from({ length: 50 }, (_, n) => client.ingest(event(500_000 + n))));
      await client.close({ timeoutMs: 10_000 });
      expect(new Set(results.map((r) => r.event_id)).size).toBe(50);
      expect(batches).toBeGreaterThanOrEqual(3);
    } finally {
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });

  it('holds at most maxQueued events: past it ingest is refused overloaded at once, and taken again once some are answered', async () => {
    const client = new VigilClient({ url: server.url, key: ADMIN_KEY, maxQueued: 10 });
    const first = Array.from({ length: 10 }, (_, n) => client.ingest(event(200_000 + n)));
    await expect(client.ingest(event(200_010))).rejects.toMatchObject({ code: 'overloaded' });
    expect((await Promise.all(first)).every((r) => typeof r.event_id === 'number')).toBe(true);
    expect(typeof (await client.ingest(event(200_011))).event_id).toBe('number');
    await client.close();
  });

  it('close({timeoutMs}) with the server stopped rejects what is unanswered as closed, in time; sent again with the same keys, each is recorded once', async () => {
    const before = (await rows()).length;
    const warm = new VigilClient({ url: server.url, key: ADMIN_KEY });
    await warm.ingest(event(300_000)); // the socket is open before the server stops
    const events = Array.from({ length: 5 }, (_, n) => ({ ...event(300_001 + n), idempotency_key: `close-timeout-${n}` }));
    server.child.kill('SIGSTOP');
    try {
      const pending = events.map((e) => warm.ingest(e));
      const started = Date.now();
      await warm.close({ timeoutMs: 300 });
      expect(Date.now() - started).toBeLessThan(3_000);
      for (const outcome of await Promise.allSettled(pending)) expect(outcome).toMatchObject({ status: 'rejected', reason: { code: 'closed' } });
    } finally {
      server.child.kill('SIGCONT');
    }
    const again = new VigilClient({ url: server.url, key: ADMIN_KEY });
    const results = await Promise.all(events.map((e) => again.ingest(e)));
    await again.close();
    expect(new Set(results.map((r) => r.event_id)).size).toBe(5);
    const keyed = (await rows()).slice(before).filter((r) => r.kind === 'event' && String(r.body.idempotency_key).startsWith('close-timeout-'));
    expect(keyed.map((r) => r.body.idempotency_key).sort()).toEqual(events.map((e) => e.idempotency_key).sort());
  }, 30_000);

  it('server killed (kill -9) and restarted mid-stream: the client reconnects, resends, and each event is in the ledger exactly once', async () => {
    const before = (await rows()).length;
    const client = new VigilClient({ url: server.url, key: ADMIN_KEY, maxBatch: 50, lingerMs: 1, backoff: { initialMs: 50, maxMs: 500 } });
    const total = 3000;
    const pending: Promise<IngestResult>[] = [];
    for (let n = 0; n < total; n++) {
      pending.push(client.ingest(event(100_000 + n)));
      if (n === 1000) {
        // Some frames answered, some in flight, some queued: the server dies.
        await new Promise((r) => setTimeout(r, 20));
        server.child.kill('SIGKILL');
        await server.exited;
        setTimeout(() => void start(), 300);
      }
      if (n % 200 === 0) await new Promise((r) => setImmediate(r));
    }
    const results = await Promise.all(pending);
    await client.close();
    expect(new Set(results.map((r) => r.event_id)).size).toBe(total);
    const mine = (await rows()).slice(before).filter((r) => r.kind === 'event' && r.body.payload.n >= 100_000);
    const seen = mine.map((r) => r.body.payload.n as number);
    expect(seen.length).toBe(total);
    expect(new Set(seen).size).toBe(total);
    expect((await call(server.url, 'GET', '/audit/runtime-bot/verify')).body).toMatchObject({ ok: true });
  }, 90_000);
});
