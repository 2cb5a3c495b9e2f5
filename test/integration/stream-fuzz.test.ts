/**
 * Fuzzing `GET /events/stream` (DESIGN §9) with fast-check over one real WebSocket to the real
 * service: whole frames that are hostile JSON text (the HTTP fuzz suite's shapes: 1e999, deep
 * nesting, lone surrogates, `__proto__`, a megabyte), random bytes as msgpack, and well-formed
 * frames whose events are mutated or hostile. What must hold: every frame is answered (an error
 * frame, or one result per event) and the connection stays open, except a message over the hard
 * cap, which closes it with 1009; nothing but valid events is recorded, and the chain verifies.
 */
import fc from 'fast-check';
import { pack, unpack } from 'msgpackr';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { hostileBody, mutatedBody } from '../support/hostile.js';
import { ADMIN_KEY, call, parseLines, removeDir, startServer, tempDir, type TestServer } from '../support/server.js';

const RUNS = Math.max(1, Number(process.env.VIGIL_FUZZ_RUNS ?? '1'));
const SEED = process.env.VIGIL_FUZZ_SEED;
if (SEED !== undefined) fc.configureGlobal({ seed: Number(SEED) });
const EVENT = { agent_id: 'fuzz-bot', event_type: 'output_generated', payload: { n: 1 } };

interface Socket {
  ws: WebSocket;
  /** The next answer, or null if the socket closed first (then `closeCode` says how). */
  answer(): Promise<any>;
  closeCode: number | null;
}

function connect(url: string, protocol: 'vigil.v1+json' | 'vigil.v1+msgpack'): Promise<Socket> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/events/stream`, protocol, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  const answers: any[] = [];
  const waiting: ((value: any) => void)[] = [];
  const socket: Socket = {
    ws,
    closeCode: null,
    answer: () => (answers.length > 0 ? Promise.resolve(answers.shift()) : socket.closeCode !== null ? Promise.resolve(null) : new Promise((resolve) => waiting.push(resolve))),
  };
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    const frame = isBinary ? unpack(data) : JSON.parse(data.toString('utf8'));
    const next = waiting.shift();
    if (next !== undefined) next(frame);
    else answers.push(frame);
  });
  ws.on('close', (code) => {
    socket.closeCode = code;
    for (const next of waiting.splice(0)) next(null);
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(socket));
    ws.once('error', reject);
  });
}

/** Fails the property unless `answer` is a well-formed answer to a frame sent with `id` (null: unreadable id) and `events` events (null: unknown). */
function checkAnswer(answer: any, id: unknown, events: number | null): void {
  expect(answer).not.toBeNull();
  if (answer.error !== undefined) {
    expect(typeof answer.error.code).toBe('string');
    expect(typeof answer.error.message).toBe('string');
    expect(answer.id === id || answer.id === null).toBe(true);
    return;
  }
  expect(answer.id).toEqual(id);
  expect(Array.isArray(answer.results)).toBe(true);
  if (events !== null) expect(answer.results.length).toBe(events);
  for (const result of answer.results) expect(typeof result.event_id === 'number' || typeof result.error?.code === 'string').toBe(true);
}

describe('GET /events/stream under fuzzing (fast-check, real WebSocket)', () => {
  let dir: string;
  let server: TestServer;
  let recorded = 0;

  beforeAll(async () => {
    dir = tempDir('vigil-stream-fuzz-');
    server = await startServer({}, dir);
    expect((await call(server.url, 'POST', '/agents/', { body: { agent_id: 'fuzz-bot', name: 'Fuzz' } })).status).toBe(201);
  });
  afterAll(async () => {
    await server?.close();
    removeDir(dir);
  });

  it('answers every whole-frame hostile JSON text without closing (or closes 1009 past the cap)', async () => {
    const socket = await connect(server.url, 'vigil.v1+json');
    await fc.assert(
      fc.asyncProperty(hostileBody({ id: 1, events: [EVENT] }), async (body) => {
        const text = body.body();
        if (socket.closeCode !== null) return;
        socket.ws.send(typeof text === 'string' ? text : (text ?? ''));
        const answer = await socket.answer();
        if (answer === null) {
          expect(socket.closeCode).toBe(1009);
          return;
        }
        checkAnswer(answer, answer.id, null);
        if (answer.results !== undefined) recorded += answer.results.filter((r: any) => typeof r.event_id === 'number').length;
      }),
      { numRuns: 40 * RUNS },
    );
    socket.ws.close();
  }, 120_000);

  it('answers frames whose events are mutated or hostile: one result per event, the bad ones refused alone', async () => {
    const socket = await connect(server.url, 'vigil.v1+json');
    let id = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(mutatedBody(EVENT), hostileBody(EVENT)), { minLength: 1, maxLength: 5 }), async (cases) => {
        const texts = cases.map((c) => c.body()).map((t) => (typeof t === 'string' ? t : 'null'));
        // Each event's text spliced in as is (not re-serialized): what the JSON parser meets is the hostile text.
        const frame = `{"id":${++id},"events":[${texts.map((t) => (t.trim() === '' ? 'null' : t)).join(',')}]}`;
        // Over the 2 MiB message cap the server closes the socket (a case of the first property): bytes, not characters.
        if (Buffer.byteLength(frame) > 2 * 1024 * 1024 - 64) return;
        socket.ws.send(frame);
        const answer = await socket.answer();
        expect(socket.closeCode).toBeNull();
        checkAnswer(answer, id, answer?.error === undefined ? cases.length : null);
        if (answer?.results !== undefined) recorded += answer.results.filter((r: any) => typeof r.event_id === 'number').length;
      }),
      { numRuns: 40 * RUNS },
    );
    socket.ws.close();
  }, 120_000);

  it('answers random bytes and random values as msgpack frames with error frames, the connection open', async () => {
    const socket = await connect(server.url, 'vigil.v1+msgpack');
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.uint8Array({ minLength: 0, maxLength: 2000 }), fc.anything().map((v) => pack(v) as Uint8Array)), async (bytes) => {
        socket.ws.send(bytes, { binary: true });
        const answer = await socket.answer();
        expect(socket.closeCode).toBeNull();
        checkAnswer(answer, answer?.id, null);
        if (answer?.results !== undefined) recorded += answer.results.filter((r: any) => typeof r.event_id === 'number').length;
      }),
      { numRuns: 60 * RUNS },
    );
    // Still a working stream after all that.
    socket.ws.send(pack({ id: 'after', events: [EVENT] }), { binary: true });
    const answer = await socket.answer();
    expect(answer).toMatchObject({ id: 'after', results: [{ gate_status: expect.any(String) }] });
    recorded += 1;
    socket.ws.close();
  }, 120_000);

  it('recorded exactly the events answered with a result, and the chain verifies', async () => {
    const rows = parseLines((await call(server.url, 'GET', '/audit/export')).text).filter((r) => r.kind === 'event');
    expect(rows.length).toBe(recorded);
    expect((await call(server.url, 'GET', '/audit/fuzz-bot/verify')).body).toMatchObject({ ok: true });
    expect((await call(server.url, 'GET', '/health')).status).toBe(200);
  });
});
