import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IngestResult } from '../../src/bus/messages.js';
import { NO_LIMITS } from '../../src/domain/org-state.js';
import { MAX_JSON_DEPTH } from '../../src/http/json-shape.js';
import { call, removeDir, startServer, type TestServer } from '../support/server.js';
import { withWriter } from '../support/writer.js';

// Issue 13, items 1 and 7: bodies JSON.parse accepts but a ledger cannot record faithfully are
// refused at the edge with the field path, and nothing a command carries can stop a writer.

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
  await call(server.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } });
});
afterAll(async () => {
  await server.close();
  removeDir(server.dataDir);
});

const nest = (depth: number, open: string, close: string, leaf = '1'): string => open.repeat(depth) + leaf + close.repeat(depth);
const eventWith = (payloadJson: string): string => `{"agent_id":"a","event_type":"output_generated","payload":${payloadJson}}`;

async function ledgerLength(): Promise<number> {
  const res = await call(server.url, 'GET', '/audit/export');
  return res.text.split('\n').filter(Boolean).length;
}

async function expectRefused(path: string, raw: string, field: string, message: RegExp, method = 'POST'): Promise<void> {
  const res = await call(server.url, method, path, { raw });
  expect(res.status, raw.slice(0, 80)).toBe(400);
  expect(res.body.error.code).toBe('validation_failed');
  expect(res.body.error.details).toEqual([{ path: field, message: expect.stringMatching(message) }]);
}

describe('hostile JSON bodies', () => {
  it('refuses numbers that parse to ±Infinity with the field path, records nothing, and stays up', async () => {
    const before = await ledgerLength();
    await expectRefused('/events/', eventWith('{"x":1e999}'), 'payload.x', /finite/);
    await expectRefused('/events/', eventWith('{"list":[1,-1e999]}'), 'payload.list.1', /finite/);
    await expectRefused('/events/', '{"agent_id":"a","event_type":"output_generated","payload":{},"dti":1e400}', 'dti', /finite/);
    expect(await ledgerLength()).toBe(before);
    const ok = await call(server.url, 'POST', '/events/', { raw: eventWith('{"x":1e308}') });
    expect(ok.status).toBe(200);
    expect((await call(server.url, 'GET', '/health')).status).toBe(200);
  });

  it('refuses nesting deeper than the documented depth, however deep, and accepts it at the limit', async () => {
    const before = await ledgerLength();
    for (const depth of [MAX_JSON_DEPTH, 4_500, 200_000]) {
      await expectRefused('/events/', eventWith(nest(depth, '[', ']')), 'payload' + '.0'.repeat(MAX_JSON_DEPTH - 1), /nested deeper than 64/);
    }
    await expectRefused('/events/', eventWith(nest(7_500, '{"k":', '}')), `payload${'.k'.repeat(MAX_JSON_DEPTH - 1)}`, /nested deeper/);
    expect(await ledgerLength()).toBe(before);
    // The body is one level: a payload may hold MAX_JSON_DEPTH - 1 levels (itself included).
    const deepest = await call(server.url, 'POST', '/events/', { raw: eventWith(nest(MAX_JSON_DEPTH - 2, '{"k":', '}', '{}')) });
    expect(deepest.status).toBe(200);
    const line = (await call(server.url, 'GET', '/audit/export')).text.trim().split('\n').at(-1)!;
    expect(line).toContain(nest(MAX_JSON_DEPTH - 2, '{"k":', '}', '{}'));
  });

  it('refuses prototype member names anywhere instead of dropping them from the record', async () => {
    const before = await ledgerLength();
    await expectRefused('/events/', eventWith('{"a":{"__proto__":{"polluted":true}}}'), 'payload.a.__proto__', /__proto__/);
    await expectRefused('/events/', eventWith('{"constructor":1}'), 'payload.constructor', /constructor/);
    await expectRefused('/events/', eventWith('[{"prototype":{}}]'), 'payload.0.prototype', /prototype/);
    await expectRefused('/agents/', '{"agent_id":"p","name":"P","__proto__":{}}', '__proto__', /__proto__/);
    expect(await ledgerLength()).toBe(before);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('applies to every body: record scoring, admin, webhooks', async () => {
    await expectRefused('/api/v1/score', '{"record_id":"r","source":"s","vintage":"2026-01-01","fields":{"x":1e999}}', 'fields.x', /finite/);
    await expectRefused('/admin/agents/a', `{"public":true,"public_links":${nest(100, '[', ']')}}`, 'public_links' + '.0'.repeat(MAX_JSON_DEPTH - 1), /nested/, 'PATCH');
    await expectRefused('/webhooks', '{"url":"https://h.invalid/x","events":["gate.hold"],"x":-1e999}', 'x', /finite/);
  });
});

describe('the org writer', () => {
  it('refuses a batch it cannot launch (a broken invariant past the per-command guard) and carries on', async () => {
    let failNext = false;
    const limits = () => {
      if (!failNext) return NO_LIMITS;
      failNext = false;
      throw new Error('limits unavailable');
    };
    await withWriter(async ({ ingest }) => {
      failNext = true;
      expect((await Promise.all([ingest(), ingest()])).map((r) => (r.ok ? 'ok' : r.code))).toEqual(['internal', 'internal']);
      expect(await ingest()).toMatchObject({ ok: true, value: { event_id: 1 } });
    }, { limits });
  });

  it('refuses, unrecorded, a command whose caller is gone before it is decided; one decided is recorded', async () => {
    await withWriter(async ({ ingest, rows }) => {
      const gone = { aborted: false };
      const before = ingest({}, { abandoned: gone });
      gone.aborted = true; // in the same turn, before the writer's batch is decided
      expect(await before).toMatchObject({ ok: false, code: 'unavailable', message: expect.stringContaining('nothing was recorded') });
      const late = { aborted: false };
      const decided = ingest({}, { abandoned: late });
      await new Promise((resolve) => setImmediate(resolve)); // the batch is launched
      late.aborted = true;
      expect(await decided).toMatchObject({ ok: true, value: { event_id: 1 } });
      expect((await rows()).map((r) => r.kind)).toEqual(['agent', 'event']);
    });
  });

  it('refuses a command it cannot encode alone and carries on with the same chain', async () => {
    await withWriter(async ({ ingest, rows }) => {
      // Commands that bypassed the edge: one batch holds a good, a bad and two more good ones.
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      const replies = await Promise.all([ingest({ n: 1 }), ingest({ x: Infinity }), ingest({ n: 2 }), ingest(cyclic), ingest({ n: 3 })]);
      expect(replies.map((r) => (r.ok ? 'ok' : r.code))).toEqual(['ok', 'internal', 'ok', 'internal', 'ok']);
      const ids = replies.filter((r) => r.ok).map((r) => (r.value as IngestResult).event_id);
      expect(ids).toEqual([1, 2, 3]);
      const next = await ingest({ n: 4 });
      expect(next.ok && (next.value as IngestResult).event_id).toBe(4);
      expect((await rows()).map((r) => r.seq)).toEqual([1, 2, 3, 4, 5]);
    });
  });
});
