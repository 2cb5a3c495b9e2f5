import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeModes, type ModeServers } from '../support/modes.js';
import { call, runCli } from '../support/server.js';

describeModes('events', (m) => {
  let server: ModeServers;
  let writerKey: string;
  let reviewKey: string;
  let otherOrgKey: string;

  beforeAll(async () => {
    server = await m.start();
    writerKey = (await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'] } })).body.key;
    reviewKey = (await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['review'] } })).body.key;
    const cli = await runCli(['keys', 'create', '--org', 'globex', '--scopes', 'events:write,admin'], server.cliEnv);
    otherOrgKey = cli.stdout.trim().split('\n').at(-1)!;
    await server.settle(writerKey, reviewKey, otherOrgKey);
    await call(server.url, 'POST', '/agents/', { body: { agent_id: 'agent-a', name: 'A' } });
    await call(server.url, 'POST', '/agents/', { key: otherOrgKey, body: { agent_id: 'agent-g', name: 'G' } });
  });
  afterAll(() => server.close());

  const event = (over: Record<string, unknown> = {}) => ({
    agent_id: 'agent-a',
    event_type: 'output_generated',
    payload: { content_length: 512 },
    ...over,
  });

  async function exportAll(key?: string): Promise<any[]> {
    const res = await call(server.readUrl, 'GET', '/audit/export', key === undefined ? {} : { key });
    return res.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  }

  describe('POST /events/', () => {
    it('answers one gate decision with the 2.3 fields and writes one event record', async () => {
      const before = (await exportAll()).length;
      const res = await call(server.url, 'POST', '/events/', { key: writerKey, body: event({ source: 'otel', actor: 'svc', dti: 0.1 }) });
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(
        ['action_id', 'bii', 'composite_trust', 'event_id', 'gate_status', 'reason', 'requires_human_review'].sort(),
      );
      expect(Number.isInteger(res.body.event_id)).toBe(true);
      expect(res.body.gate_status).toBe('pass');
      const rows = await exportAll();
      expect(rows.length).toBe(before + 1);
      const last = rows.at(-1);
      expect(last.kind).toBe('event');
      expect(last.agent_id).toBe('agent-a');
      expect(last.body).toMatchObject({
        event_id: res.body.event_id,
        action_id: res.body.action_id,
        event_type: 'output_generated',
        source: 'otel',
        actor: 'svc',
        dti: 0.1,
        payload: { content_length: 512 },
        gate_status: res.body.gate_status,
        bii: res.body.bii,
        composite_trust: res.body.composite_trust,
        reason: res.body.reason,
        requires_human_review: false,
        observed: true,
      });
      expect(last.body.policy_digest).toMatch(/^[0-9a-f]{64}$/);
    });

    it('gives increasing event and action ids per org', async () => {
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) ids.push((await call(server.url, 'POST', '/events', { key: writerKey, body: event() })).body.event_id);
      for (let i = 1; i < ids.length; i++) expect(ids[i]).toBe(ids[i - 1]! + 1);
      const g = await call(server.url, 'POST', '/events/', { key: otherOrgKey, body: event({ agent_id: 'agent-g' }) });
      expect(g.body.event_id).toBe(1);
    });

    it('takes a fresh agent off pass within a few high-dti events and asks for review', async () => {
      await call(server.url, 'POST', '/agents/', { body: { agent_id: 'risky', name: 'Risky' } });
      let last: any;
      for (let i = 0; i < 3; i++) last = (await call(server.url, 'POST', '/events/', { key: writerKey, body: event({ agent_id: 'risky', dti: 0.99 }) })).body;
      expect(last.gate_status).not.toBe('pass');
      expect(last.requires_human_review).toBe(true);
      expect(last.reason).toContain('dti');
    });

    it('drives the gate down when monitoring is switched off', async () => {
      await call(server.url, 'POST', '/agents/', { body: { agent_id: 'sneaky', name: 'Sneaky' } });
      const res = await call(server.url, 'POST', '/events/', {
        key: writerKey,
        body: event({ agent_id: 'sneaky', event_type: 'monitoring_state_change', payload: { enabled: false } }),
      });
      expect(res.body.gate_status).not.toBe('pass');
      expect(res.body.reason).toContain('monitoring switched off');
    });

    it('answers 404 for an unknown agent and for another org agent, and writes nothing', async () => {
      const before = (await exportAll()).length;
      const unknown = await call(server.url, 'POST', '/events/', { key: writerKey, body: event({ agent_id: 'ghost' }) });
      expect(unknown.status).toBe(404);
      const foreign = await call(server.url, 'POST', '/events/', { key: writerKey, body: event({ agent_id: 'agent-g' }) });
      expect(foreign.status).toBe(404);
      expect(foreign.body.error.code).toBe('not_found');
      expect((await exportAll()).length).toBe(before);
    });

    it('validates with details naming each bad field, and changes nothing', async () => {
      const before = (await exportAll()).length;
      const cases: [unknown, string[]][] = [
        [event({ event_type: 'teleport' }), ['event_type']],
        [event({ payload: 'text' }), ['payload']],
        [event({ dti: 2 }), ['dti']],
        [event({ source: 'moon' }), ['source']],
        [{ event_type: 'output_generated', payload: {} }, ['agent_id']],
        [event({ surprise: true }), ['surprise']],
        [[1, 2], ['body']],
      ];
      for (const [body, paths] of cases) {
        const res = await call(server.url, 'POST', '/events/', { key: writerKey, body });
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(res.body.error.code).toBe('validation_failed');
        expect(res.body.error.details.map((d: { path: string }) => d.path)).toEqual(paths);
      }
      expect((await exportAll()).length).toBe(before);
    });

    it('answers 400 for malformed JSON, 415 for a non-JSON body, 413 over 1 MiB', async () => {
      const malformed = await call(server.url, 'POST', '/events/', { key: writerKey, raw: '{"agent_id":' });
      expect(malformed.status).toBe(400);
      expect(malformed.body.error.code).toBe('bad_request');
      const form = await call(server.url, 'POST', '/events/', {
        key: writerKey,
        raw: 'agent_id=x',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(form.status).toBe(415);
      const big = JSON.stringify(event({ payload: { blob: 'x'.repeat(1024 * 1024) } }));
      const tooLarge = await call(server.url, 'POST', '/events/', { key: writerKey, raw: big });
      expect(tooLarge.status).toBe(413);
      expect(tooLarge.body.error.code).toBe('payload_too_large');
      const empty = await call(server.url, 'POST', '/events/', { key: writerKey, raw: '' });
      expect(empty.status).toBe(400);
    });

    it('answers 401 without a key and 403 for a key without events:write', async () => {
      const none = await call(server.url, 'POST', '/events/', { key: null, body: event() });
      expect(none.status).toBe(401);
      const wrongScope = await call(server.url, 'POST', '/events/', { key: reviewKey, body: event() });
      expect(wrongScope.status).toBe(403);
      expect(wrongScope.body.error.code).toBe('forbidden');
    });

    it('keeps orgs apart: each export and chain holds only its own org records', async () => {
      const mine = await exportAll();
      const theirs = await exportAll(otherOrgKey);
      expect(mine.every((r) => r.agent_id !== 'agent-g')).toBe(true);
      expect(theirs.map((r) => r.agent_id)).toEqual(['agent-g', 'agent-g']);
      expect(theirs[0].seq).toBe(1);
      const verify = await call(server.readUrl, 'GET', '/audit/agent-a/verify', { key: otherOrgKey });
      expect(verify.status).toBe(404);
    });

    it('handles concurrent ingest in order: one record per acknowledged event, no gaps', async () => {
      const before = await exportAll();
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, i) => call(server.url, 'POST', '/events/', { key: writerKey, body: event({ payload: { i } }) })),
      );
      expect(results.every((r) => r.status === 200)).toBe(true);
      const after = await exportAll();
      expect(after.length).toBe(before.length + 200);
      after.forEach((row, i) => expect(row.seq).toBe(i + 1));
      const ids = new Set(results.map((r) => r.body.event_id));
      expect(ids.size).toBe(200);
    });
  });

  describe('rate limit per key', () => {
    it('answers 429 with Retry-After past VIGIL_KEY_RATE_LIMIT requests a second', async () => {
      // The limit is kept by each process: in cluster mode every request goes to one node.
      const limited = await m.start({ VIGIL_KEY_RATE_LIMIT: '3' });
      try {
        const statuses: number[] = [];
        let retryAfter: string | null = null;
        for (let i = 0; i < 6; i++) {
          const res = await call(limited.readUrl, 'GET', '/orgs/me');
          statuses.push(res.status);
          if (res.status === 429) {
            retryAfter = res.headers.get('retry-after');
            expect(res.body.error.code).toBe('rate_limited');
          }
        }
        expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
        expect(statuses).toContain(429);
        expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
      } finally {
        await limited.close();
      }
    });
  });
});
