import { pack } from 'msgpackr';
import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { describeModes, type ModeServers } from '../support/modes.js';
import { call } from '../support/server.js';
import { openStream, rawSocket, type StreamClient } from '../support/stream-client.js';

/** `GET /events/stream` (DESIGN §9) over a real WebSocket, in both modes. */

describeModes('ingest stream', (m) => {
  let server: ModeServers;
  const clients: StreamClient[] = [];
  const connect = async (options: Parameters<typeof openStream>[1] = {}): Promise<StreamClient> => {
    const c = await openStream(server.url, options);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    server = await m.start();
    await call(server.url, 'POST', '/agents/', { body: { agent_id: 'agent-s', name: 'S' } });
  });
  afterAll(async () => {
    for (const c of clients) await c.close();
    await server.close();
  });

  const event = (over: Record<string, unknown> = {}) => ({ agent_id: 'agent-s', event_type: 'output_generated', payload: { content_length: 1 }, ...over });
  async function rowCount(): Promise<number> {
    return (await call(server.readUrl, 'GET', '/audit/export')).text.split('\n').filter(Boolean).length;
  }

  it('answers each frame with {id, results} in the order sent, once durable; results as the batch route', async () => {
    const before = await rowCount();
    const c = await connect();
    expect(c.ws.protocol).toBe('');
    for (let i = 0; i < 20; i++) c.send({ id: i, events: [event({ payload: { i, j: 0 } }), event({ payload: { i, j: 1 } })] });
    const answers = await c.next(20);
    expect(answers.map((a) => a.id)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    for (const a of answers) {
      expect(a.results).toHaveLength(2);
      expect(Object.keys(a.results[0]).sort()).toEqual(['action_id', 'bii', 'composite_trust', 'event_id', 'gate_status', 'reason', 'requires_human_review']);
    }
    const ids = answers.flatMap((a) => a.results.map((r: { event_id: number }) => r.event_id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(await rowCount()).toBe(before + 40);
  });

  it('records a connection\'s events in the order sent when a large frame is taken a slice at a time', async () => {
    const c = await connect();
    // A small frame right behind a large one must not overtake the large one's later slices.
    c.send({ id: 'large', events: Array.from({ length: 1000 }, (_, j) => event({ payload: { j } })) });
    c.send({ id: 'small', events: [event({ payload: { after: true } })] });
    const [large, small] = await c.next(2);
    const largeIds = large.results.map((r: { event_id: number }) => r.event_id);
    expect(largeIds).toEqual([...largeIds].sort((a, b) => a - b));
    expect(new Set(largeIds).size).toBe(1000);
    expect(small.results[0].event_id).toBeGreaterThan(Math.max(...largeIds));
  });

  it('speaks msgpack in binary frames under vigil.v1+msgpack, with string ids', async () => {
    const c = await connect({ protocol: 'vigil.v1+msgpack' });
    expect(c.ws.protocol).toBe('vigil.v1+msgpack');
    c.send({ id: 'a-1', events: [event(), { nope: true }] });
    const [answer] = await c.next();
    expect(answer.id).toBe('a-1');
    expect(answer.results[0].event_id).toEqual(expect.any(Number));
    expect(answer.results[1].error.code).toBe('validation_failed');
  });

  it('answers a bad frame with an error frame and keeps the connection open', async () => {
    const c = await connect();
    c.ws.send('not json');
    c.send({ id: 7, events: [] });
    c.send({ id: 8, events: [event()], extra: 1 });
    c.send({ events: [event()] });
    c.ws.send(pack({ id: 9, events: [event()] }), { binary: true }); // binary on a JSON stream
    c.send({ id: 10, events: [event()] });
    const [garbage, empty, extra, noId, binary, ok] = await c.next(6);
    expect(garbage).toMatchObject({ id: null, error: { code: 'bad_request' } });
    expect(empty).toMatchObject({ id: 7, error: { code: 'validation_failed' } });
    expect(extra).toMatchObject({ id: 8, error: { code: 'validation_failed' } });
    expect(noId).toMatchObject({ id: null, error: { code: 'validation_failed' } });
    expect(binary).toMatchObject({ id: null, error: { code: 'bad_request' } });
    expect(ok.id).toBe(10);
    expect(ok.results[0].event_id).toEqual(expect.any(Number));
    expect(c.ws.readyState).toBe(WebSocket.OPEN);
  });

  it('takes msgpack 64-bit integers as numbers, and refuses a msgpack frame holding what JSON cannot (NaN, binary)', async () => {
    const c = await connect({ protocol: 'vigil.v1+msgpack' });
    c.send({ id: 1, events: [event({ payload: { big: 2n ** 40n } })] });
    c.send({ id: 2, events: [event({ payload: { x: Number.NaN } })] });
    c.send({ id: 3, events: [event({ payload: { b: Buffer.from('hi') } })] });
    c.send({ id: 4, events: [event()] });
    const [big, nan, bin, ok] = await c.next(4);
    expect(big.results[0].event_id).toEqual(expect.any(Number));
    expect(nan).toMatchObject({ id: null, error: { code: 'bad_request' } });
    expect(bin).toMatchObject({ id: null, error: { code: 'bad_request' } });
    expect(ok.results[0].event_id).toBeGreaterThan(big.results[0].event_id);
  });

  it('refuses a frame over 1 MiB with overloaded, alone', async () => {
    const c = await connect();
    c.send({ id: 'big', events: [event({ payload: { blob: 'x'.repeat(1024 * 1024) } })] });
    c.send({ id: 'small', events: [event()] });
    const [big, small] = await c.next(2);
    expect(big).toMatchObject({ id: 'big', error: { code: 'overloaded' } });
    expect(small.results).toHaveLength(1);
  });

  it('a retry of a frame with the same idempotency keys records nothing again', async () => {
    const c = await connect();
    const frame = { id: 1, events: [event({ idempotency_key: 's-1', payload: { k: 1 } }), event({ idempotency_key: 's-2', payload: { k: 2 } })] };
    c.send(frame);
    const [first] = await c.next();
    const before = await rowCount();
    const d = await connect();
    d.send({ ...frame, id: 2 });
    const [again] = await d.next();
    expect(again.results).toEqual(first.results);
    expect(await rowCount()).toBe(before);
  });

  it('answers overloaded past VIGIL_STREAM_MAX_FRAMES frames in flight, each in its turn; the refused ones go through when sent again', async () => {
    const limited = await m.start({ VIGIL_STREAM_MAX_FRAMES: '2' });
    try {
      await call(limited.url, 'POST', '/agents/', { body: { agent_id: 'agent-s', name: 'S' } });
      const c = await openStream(limited.url);
      clients.push(c);
      const frames = 20;
      for (let i = 0; i < frames; i++) c.send({ id: i, events: Array.from({ length: 1000 }, (_, j) => event({ payload: { i, j } })) });
      const answers = await c.next(frames);
      expect(answers.map((a) => a.id)).toEqual(Array.from({ length: frames }, (_, i) => i));
      const refused = answers.filter((a) => a.error !== undefined);
      expect(refused.length).toBeGreaterThan(0);
      expect(refused.every((a) => a.error.code === 'overloaded')).toBe(true);
      expect(answers.filter((a) => a.results?.length === 1000).length).toBe(frames - refused.length);
      c.send({ id: 'again', events: [event()] });
      expect((await c.next())[0].results).toHaveLength(1);
    } finally {
      await limited.close();
    }
  }, 60_000);

  it('holds answers for a reader that stops reading (backpressure) and sends them all, in order, once it reads again', async () => {
    const c = await connect();
    const socket = rawSocket(c.ws);
    socket.pause();
    // 9,600 events: under VIGIL_MAX_PENDING (10,000), so none is refused; answers well past 1 MiB.
    const frames = 40;
    for (let i = 0; i < frames; i++) c.send({ id: i, events: Array.from({ length: 240 }, (_, j) => event({ payload: { i, j } })) });
    await new Promise((r) => setTimeout(r, 1000));
    socket.resume();
    const answers = await c.next(frames);
    expect(answers.map((a) => a.id)).toEqual(Array.from({ length: frames }, (_, i) => i));
    expect(answers.every((a) => a.results?.length === 240)).toBe(true);
  }, 60_000);

  // The socket's idle handling is uWebSockets.js's, the same in both modes: tested once (it takes ~30 s).
  it.runIf(m.mode === 'embedded')('pings a silent connection after VIGIL_STREAM_IDLE_SECONDS, keeps one that answers, and closes one that does not', async () => {
    const idle = await m.start({ VIGIL_STREAM_IDLE_SECONDS: '8' });
    try {
      await call(idle.url, 'POST', '/agents/', { body: { agent_id: 'agent-s', name: 'S' } });
      const answering = await openStream(idle.url);
      const silent = await openStream(idle.url);
      clients.push(answering, silent);
      let pings = 0;
      answering.ws.on('ping', () => void pings++); // ws answers each with a pong
      let closed = false;
      silent.ws.on('close', () => void (closed = true));
      const socket = rawSocket(silent.ws);
      socket.pause(); // it reads nothing, so it never answers a ping
      const started = Date.now();
      while (pings === 0 && Date.now() - started < 20_000) await new Promise((r) => setTimeout(r, 250));
      expect(pings).toBeGreaterThan(0);
      // A ping unanswered for another idle period closes the connection.
      await new Promise((r) => setTimeout(r, Math.max(0, 26_000 - (Date.now() - started))));
      socket.resume();
      const until = Date.now() + 5_000;
      while (!closed && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
      expect(closed).toBe(true);
      expect(answering.ws.readyState).toBe(WebSocket.OPEN);
      answering.send({ id: 'still', events: [event()] });
      expect((await answering.next())[0].results).toHaveLength(1);
    } finally {
      await idle.close();
    }
  }, 60_000);

  it('refuses the upgrade as HTTP: 401 without a key, 403 without events:write, 400 for an unknown subprotocol', async () => {
    await expect(openStream(server.url, { key: null })).rejects.toMatchObject({ status: 401 });
    const reviewer = (await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['review'] } })).body.key;
    await server.settle(reviewer);
    const forbidden = await openStream(server.url, { key: reviewer }).catch((e: { status: number; body: string }) => e);
    expect(forbidden).toMatchObject({ status: 403 });
    expect(JSON.parse((forbidden as { body: string }).body).error.code).toBe('forbidden');
    await expect(openStream(server.url, { protocol: 'vigil.v2' })).rejects.toMatchObject({ status: 400 });
  });
});
