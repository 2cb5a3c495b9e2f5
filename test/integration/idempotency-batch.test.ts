import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeModes, type ModeServers } from '../support/modes.js';
import { call } from '../support/server.js';

/** DESIGN §9: `Idempotency-Key` / `idempotency_key`, and `POST /events/batch`, in both modes. */
describeModes('idempotency and batches', (m) => {
  let server: ModeServers;

  beforeAll(async () => {
    server = await m.start();
    await call(server.url, 'POST', '/agents/', { body: { agent_id: 'agent-i', name: 'I' } });
  });
  afterAll(() => server.close());

  const event = (over: Record<string, unknown> = {}) => ({ agent_id: 'agent-i', event_type: 'output_generated', payload: { content_length: 512 }, ...over });

  async function rows(): Promise<any[]> {
    const res = await call(server.readUrl, 'GET', '/audit/export');
    return res.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  }

  describe('Idempotency-Key on POST /events/', () => {
    it('a retry with the key answers the first result and writes nothing; the key is in the record', async () => {
      const before = (await rows()).length;
      const first = await call(server.url, 'POST', '/events/', { body: event(), headers: { 'idempotency-key': 'run-1:evt-1' } });
      expect(first.status).toBe(200);
      const again = await call(server.url, 'POST', '/events/', { body: event(), headers: { 'idempotency-key': 'run-1:evt-1' } });
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      // The same key in the body is the same key.
      const inBody = await call(server.url, 'POST', '/events/', { body: event({ idempotency_key: 'run-1:evt-1' }) });
      expect(inBody.body).toEqual(first.body);
      const after = await rows();
      expect(after.length).toBe(before + 1);
      expect(after.at(-1)).toMatchObject({ kind: 'event', body: { event_id: first.body.event_id, idempotency_key: 'run-1:evt-1' } });
      expect((await call(server.readUrl, 'GET', '/audit/agent-i/verify')).body).toMatchObject({ ok: true });
    });

    it('the same key with a different event: 409 idempotency_conflict, nothing written', async () => {
      await call(server.url, 'POST', '/events/', { body: event(), headers: { 'idempotency-key': 'k-conflict' } });
      const before = (await rows()).length;
      for (const other of [event({ payload: { content_length: 513 } }), event({ event_type: 'config_read' }), event({ dti: 0.5 })]) {
        const res = await call(server.url, 'POST', '/events/', { body: other, headers: { 'idempotency-key': 'k-conflict' } });
        expect(res.status).toBe(409);
        expect(res.body.error.code).toBe('idempotency_conflict');
      }
      expect((await rows()).length).toBe(before);
    });

    it('keys are per org, and a key refused (unknown agent) is not used up', async () => {
      const refused = await call(server.url, 'POST', '/events/', { body: event({ agent_id: 'nobody' }), headers: { 'idempotency-key': 'k-free' } });
      expect(refused.status).toBe(404);
      const ok = await call(server.url, 'POST', '/events/', { body: event(), headers: { 'idempotency-key': 'k-free' } });
      expect(ok.status).toBe(200);
    });

    it('refuses a malformed key and a header that differs from the body\'s key, writing nothing', async () => {
      const before = (await rows()).length;
      for (const bad of ['', 'has space', 'x'.repeat(129), 'a/b', 'k=v']) {
        const res = await call(server.url, 'POST', '/events/', { body: event(), headers: { 'idempotency-key': bad } });
        if (bad === '') continue; // an empty header is no header
        expect([bad, res.status]).toEqual([bad, 400]);
        expect(res.body.error.details[0].path).toBe('Idempotency-Key');
      }
      const differs = await call(server.url, 'POST', '/events/', { body: event({ idempotency_key: 'a' }), headers: { 'idempotency-key': 'b' } });
      expect(differs.status).toBe(400);
      const badBody = await call(server.url, 'POST', '/events/', { body: event({ idempotency_key: 'no spaces allowed' }) });
      expect(badBody.status).toBe(400);
      expect(badBody.body.error.details[0].path).toBe('idempotency_key');
      expect((await rows()).length).toBe(before + 1); // only the empty header's event (an empty header is no key)
    });

    it('concurrent retries of one key record it once', async () => {
      const before = (await rows()).length;
      const all = await Promise.all(Array.from({ length: 20 }, () => call(server.url, 'POST', '/events/', { body: event({ payload: { n: 'same' } }), headers: { 'idempotency-key': 'k-race' } })));
      expect(new Set(all.map((r) => r.status))).toEqual(new Set([200]));
      expect(new Set(all.map((r) => r.body.event_id)).size).toBe(1);
      expect((await rows()).length).toBe(before + 1);
    });

    it('survives a restart: the key is answered from the ledger', async () => {
      const first = await call(server.url, 'POST', '/events/', { body: event({ payload: { n: 'restart' } }), headers: { 'idempotency-key': 'k-restart' } });
      await server.restart();
      const before = (await rows()).length;
      const again = await call(server.url, 'POST', '/events/', { body: event({ payload: { n: 'restart' } }), headers: { 'idempotency-key': 'k-restart' } });
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      const conflict = await call(server.url, 'POST', '/events/', { body: event({ payload: { n: 'other' } }), headers: { 'idempotency-key': 'k-restart' } });
      expect(conflict.status).toBe(409);
      expect((await rows()).length).toBe(before);
    });
  });

  describe('POST /events/batch', () => {
    it('answers per-event results in order; a bad event fails alone; keys apply per event', async () => {
      const before = (await rows()).length;
      const res = await call(server.url, 'POST', '/events/batch', {
        body: {
          events: [
            event({ payload: { i: 0 } }),
            { agent_id: 'agent-i', event_type: 'nope', payload: {} },
            event({ agent_id: 'nobody' }),
            event({ payload: { i: 3 }, idempotency_key: 'b-3' }),
            event({ payload: { i: 3 }, idempotency_key: 'b-3' }),
            event({ payload: { i: 5 }, idempotency_key: 'b-3' }),
            'not an object',
          ],
        },
      });
      expect(res.status).toBe(200);
      const r = res.body.results;
      expect(r).toHaveLength(7);
      expect(r[0]).toMatchObject({ gate_status: expect.any(String) });
      expect(r[1].error).toMatchObject({ code: 'validation_failed', details: [{ path: 'event_type' }] });
      expect(r[2].error).toMatchObject({ code: 'not_found' });
      expect(r[3].event_id).toBeGreaterThan(r[0].event_id);
      expect(r[4]).toEqual(r[3]);
      expect(r[5].error.code).toBe('idempotency_conflict');
      expect(r[6].error.code).toBe('validation_failed');
      expect((await rows()).length).toBe(before + 2);
      // A retry of the whole batch writes nothing for the keyed event.
      const retry = await call(server.url, 'POST', '/events/batch', { body: { events: [event({ payload: { i: 3 }, idempotency_key: 'b-3' })] } });
      expect(retry.body.results).toEqual([r[3]]);
      expect((await rows()).length).toBe(before + 2);
    });

    it('takes 1 to 1000 events: 0 or 1001 is a 400 for the request, as is malformed JSON; nothing written', async () => {
      const before = (await rows()).length;
      for (const body of [{ events: [] }, { events: Array.from({ length: 1001 }, () => event()) }, { events: 'x' }, {}, { events: [event()], extra: 1 }]) {
        const res = await call(server.url, 'POST', '/events/batch', { body });
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe('validation_failed');
      }
      const malformed = await call(server.url, 'POST', '/events/batch', { raw: '{"events": [' });
      expect(malformed.status).toBe(400);
      expect((await rows()).length).toBe(before);
      const full = await call(server.url, 'POST', '/events/batch', { body: { events: Array.from({ length: 1000 }, (_, i) => event({ payload: { i } })) } });
      expect(full.status).toBe(200);
      expect(full.body.results).toHaveLength(1000);
      const ids = full.body.results.map((x: { event_id: number }) => x.event_id);
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
      expect((await rows()).length).toBe(before + 1000);
    });

    it('needs events:write', async () => {
      const reviewer = (await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['review'] } })).body.key;
      await server.settle(reviewer);
      expect((await call(server.url, 'POST', '/events/batch', { key: reviewer, body: { events: [event()] } })).status).toBe(403);
      expect((await call(server.url, 'POST', '/events/batch', { key: null, body: { events: [event()] } })).status).toBe(401);
    });
  });
});
