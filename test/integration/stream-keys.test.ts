import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { describeModes, type ModeServers } from '../support/modes.js';
import { call, parseLines, runCli } from '../support/server.js';
import { openStream, type StreamClient } from '../support/stream-client.js';

/**
 * `GET /events/stream` against its key's current state (README, Streaming ingest): a revoked key's
 * stream writes nothing more and is closed 4401, flowing or idle, whichever node revoked it; and
 * the key's rate limit counts a stream's events (and a batch's), not its upgrade.
 */

/** Generous for a loaded 2-core box; the server closes within a second (KEY_CHECK_MS and the store's lag). */
const CLOSE_DEADLINE_MS = 2_000;

describeModes('stream keys', (m) => {
  let server: ModeServers;
  const clients: StreamClient[] = [];
  /** Where revocations are sent: the node the streams are not on, in cluster mode. */
  let revokeUrl: string;

  beforeAll(async () => {
    server = await m.start();
    revokeUrl = server.readUrl;
    for (const agent of ['flow', 'idle']) await call(server.url, 'POST', '/agents/', { body: { agent_id: agent, name: agent } });
  });
  afterAll(async () => {
    for (const c of clients) await c.close();
    await server.close();
  });

  const event = (agent: string, frame: number) => ({ agent_id: agent, event_type: 'output_generated', payload: { frame }, idempotency_key: `${agent}-${frame}` });

  async function writerKey(s: ModeServers, name: string): Promise<{ id: string; key: string }> {
    const created = await call(s.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'], name } });
    expect(created.status).toBe(201);
    await s.settle(created.body.key);
    return created.body;
  }

  async function connect(url: string, key: string): Promise<StreamClient> {
    const c = await openStream(url, { key });
    clients.push(c);
    return c;
  }

  /** The frame numbers of the agent's records in the ledger. */
  async function recordedFrames(s: ModeServers, agent: string): Promise<number[]> {
    const exported = await call(s.readUrl, 'GET', `/audit/export?agent_id=${agent}`);
    expect(exported.status).toBe(200);
    return parseLines(exported.text)
      .filter((r) => r.kind === 'event')
      .map((r) => r.body.payload.frame as number);
  }

  function closedWithin(c: StreamClient, ms: number): Promise<{ code: number; reason: string } | 'still open'> {
    return Promise.race([c.closed, new Promise<'still open'>((resolve) => setTimeout(() => resolve('still open'), ms))]);
  }

  it('a stream whose key is revoked while frames flow writes nothing sent after the revocation and is closed 4401 "key revoked"', async () => {
    const key = await writerKey(server, 'flowing');
    const c = await connect(server.url, key.key);
    let sent = 0;
    const send = (): void => {
      if (c.ws.readyState !== WebSocket.OPEN) return;
      c.send({ id: sent, events: [event('flow', sent)] });
      sent++;
    };
    const pump = setInterval(send, 10);
    let firstAfter: number;
    let closed: Awaited<ReturnType<typeof closedWithin>>;
    try {
      await c.next(10);
      expect(c.frames.slice(0, 10).every((f) => f.results?.length === 1)).toBe(true);
      const revoked = await call(revokeUrl, 'DELETE', `/admin/keys/${key.id}`);
      expect(revoked.status).toBe(200);
      const started = Date.now();
      // Embedded: the store holds the revocation before its 200. Cluster: the stream's node holds it once its KV watch delivers it.
      await server.eventually('the stream\'s node to refuse the key', async () => (await call(server.url, 'GET', '/orgs/me', { key: key.key })).status === 401);
      firstAfter = sent;
      send();
      send();
      closed = await closedWithin(c, Math.max(0, CLOSE_DEADLINE_MS - (Date.now() - started)));
    } finally {
      clearInterval(pump);
    }
    expect(closed).toEqual({ code: 4401, reason: 'key revoked' });
    const recorded = await recordedFrames(server, 'flow');
    expect(recorded.filter((frame) => frame >= firstAfter)).toEqual([]);
    // Nothing acknowledged is lost: every frame answered with results is recorded.
    const acknowledged = c.frames.filter((f) => f.results !== undefined).map((f) => f.id as number);
    expect(acknowledged.length).toBeGreaterThanOrEqual(10);
    for (const frame of acknowledged) expect(recorded).toContain(frame);
  });

  it('an idle stream is closed within about a second of its key\'s revocation by the CLI (on another process)', async () => {
    const key = await writerKey(server, 'idle');
    const c = await connect(server.url, key.key);
    c.send({ id: 0, events: [event('idle', 0)] });
    expect((await c.next())[0].results).toHaveLength(1);
    const out = await runCli(['keys', 'revoke', key.id], server.cliEnv);
    expect(out.code).toBe(0);
    expect(await closedWithin(c, CLOSE_DEADLINE_MS)).toEqual({ code: 4401, reason: 'key revoked' });
  });

  it('an idle stream is closed when its key is revoked over HTTP (on the other node, in cluster mode)', async () => {
    const key = await writerKey(server, 'idle-http');
    const c = await connect(server.url, key.key);
    c.send({ id: 0, events: [event('idle', 1)] });
    expect((await c.next())[0].results).toHaveLength(1);
    expect((await call(revokeUrl, 'DELETE', `/admin/keys/${key.id}`)).status).toBe(200);
    expect(await closedWithin(c, CLOSE_DEADLINE_MS)).toEqual({ code: 4401, reason: 'key revoked' });
    // Other streams live on: the admin key's still writes.
    const other = await connect(server.url, (await writerKey(server, 'still-good')).key);
    other.send({ id: 'ok', events: [event('idle', 2)] });
    expect((await other.next())[0].results).toHaveLength(1);
  });

  it('counts a stream\'s events against VIGIL_KEY_RATE_LIMIT: frames past it are answered rate_limited with retry_after_seconds, write nothing, and go through when sent again', async () => {
    const limited = await m.start({ VIGIL_KEY_RATE_LIMIT: '10' });
    try {
      await call(limited.url, 'POST', '/agents/', { body: { agent_id: 'flow', name: 'flow' } });
      // Before the key exists: every window of it (settle's reads in cluster mode, the upgrade, the frames) starts after this.
      const started = Date.now();
      const key = await writerKey(limited, 'rated');
      const c = await openStream(limited.url, { key: key.key });
      clients.push(c);
      const frames = 20;
      for (let i = 0; i < frames; i++) c.send({ id: i, events: [event('flow', 3 * i), event('flow', 3 * i + 1), event('flow', 3 * i + 2)] });
      const answers = await c.next(frames);
      const elapsed = Date.now() - started;
      const refused = answers.filter((a) => a.error !== undefined);
      const accepted = answers.filter((a) => a.results !== undefined);
      expect(refused.length).toBeGreaterThan(0);
      for (const a of refused) {
        expect(a.error).toMatchObject({ code: 'rate_limited', message: expect.any(String) });
        expect(a.error.retry_after_seconds).toBeGreaterThanOrEqual(1);
      }
      // Fixed windows of a second, the first opened by a request (the upgrade at least): up to 10 events in each.
      const windows = Math.floor(elapsed / 1000) + 1;
      expect(accepted.length * 3).toBeLessThanOrEqual(10 * windows - 1);
      const recorded = await recordedFrames(limited, 'flow');
      expect(recorded).toHaveLength(accepted.length * 3);
      expect(c.ws.readyState).toBe(WebSocket.OPEN);
      // Sent again after its retry_after_seconds, with the same keys, a refused frame goes through.
      const first = refused[0]!;
      await new Promise((resolve) => setTimeout(resolve, first.error.retry_after_seconds * 1000));
      const i = first.id as number;
      c.send({ id: 'again', events: [event('flow', 3 * i), event('flow', 3 * i + 1), event('flow', 3 * i + 2)] });
      expect((await c.next())[0]).toMatchObject({ id: 'again', results: [{ event_id: expect.any(Number) }, { event_id: expect.any(Number) }, { event_id: expect.any(Number) }] });
      // More events in one frame than the rate allows in a second: taken from an empty window, which then stays full for two.
      const huge = { events: Array.from({ length: 15 }, (_, j) => event('flow', 1000 + j)) };
      let answer: any;
      for (let tries = 0; tries < 5; tries++) {
        c.send({ id: 'huge', ...huge });
        [answer] = await c.next();
        if (answer.results !== undefined) break;
        expect(answer.error.code).toBe('rate_limited');
        await new Promise((resolve) => setTimeout(resolve, answer.error.retry_after_seconds * 1000));
      }
      expect(answer.results).toHaveLength(15);
      c.send({ id: 'after', events: [event('flow', 2000)] });
      expect((await c.next())[0]).toMatchObject({ id: 'after', error: { code: 'rate_limited' } });
    } finally {
      await limited.close();
    }
  }, 30_000);

  it('counts a batch\'s events against VIGIL_KEY_RATE_LIMIT, in place of its request: 429 with Retry-After, nothing written', async () => {
    const limited = await m.start({ VIGIL_KEY_RATE_LIMIT: '5' });
    try {
      await call(limited.url, 'POST', '/agents/', { body: { agent_id: 'flow', name: 'flow' } });
      const started = Date.now();
      const key = await writerKey(limited, 'batch');
      const batch = (n: number, size = 3) => call(limited.url, 'POST', '/events/batch', { key: key.key, body: { events: Array.from({ length: size }, (_, j) => event('flow', 100 * n + j)) } });
      // Batches of 3 events one after another: the first fits in a window of 5, the next does not.
      const answers = [];
      for (let n = 0; n < 4; n++) answers.push(await batch(n));
      const elapsed = Date.now() - started;
      const accepted = answers.filter((a) => a.status === 200);
      const refused = answers.filter((a) => a.status === 429);
      expect(accepted.length + refused.length).toBe(4);
      expect(refused.length).toBeGreaterThan(0);
      for (const a of refused) {
        expect(a.body.error.code).toBe('rate_limited');
        expect(Number(a.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      }
      // Fixed windows of a second, each holding up to 5 events.
      expect(accepted.length * 3).toBeLessThanOrEqual(5 * (Math.floor(elapsed / 1000) + 1));
      expect(await recordedFrames(limited, 'flow')).toHaveLength(accepted.length * 3);
      // A batch larger than the rate goes through from an empty window (after Retry-After), and holds it for two.
      await new Promise((resolve) => setTimeout(resolve, Number(refused[0]!.headers.get('retry-after')) * 1000));
      const big = await batch(10, 8);
      expect(big.status).toBe(200);
      expect(big.body.results).toHaveLength(8);
      expect((await batch(11, 1)).status).toBe(429);
      expect(await recordedFrames(limited, 'flow')).toHaveLength(accepted.length * 3 + 8);
    } finally {
      await limited.close();
    }
  }, 30_000);
});
