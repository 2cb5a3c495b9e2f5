import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../src/client/index.js';
import { startReceiver, waitFor, type Receiver } from '../support/receiver.js';
import { describeModes, type ModeServers } from '../support/modes.js';
import { call, parseLines, removeDir, runCli, spawnServer, tempDir } from '../support/server.js';

const ENV = { VIGIL_WEBHOOK_ALLOW_PRIVATE: '1', VIGIL_WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,0.2,0.2,0.2' };
const ITEM_FIELDS = [
  'action_id',
  'agent_id',
  'bii',
  'decided_at',
  'event_id',
  'event_type',
  'gate',
  'ledger_seq',
  'note',
  'reason',
  'recorded_at',
  'reviewer',
  'status',
];

describeModes('reviews', (m) => {
  let server: ModeServers;
  let writerKey: string;
  /** A review key named alice, and an unnamed one (its decisions name its id). */
  let alice: string;
  let anonymous: { key: string; id: string };

  beforeAll(async () => {
    server = await m.start(ENV);
    writerKey = (await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'] } })).body.key;
    alice = (await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['review'], name: 'alice' } })).body.key;
    const created = await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['review'] } });
    anonymous = { key: created.body.key, id: created.body.id };
    await server.settle(writerKey, alice, anonymous.key);
  });
  afterAll(() => server.close());

  let agents = 0;
  async function newAgent(): Promise<string> {
    const id = `agent-${++agents}`;
    expect((await call(server.url, 'POST', '/agents/', { body: { agent_id: id, name: id } })).status).toBe(201);
    return id;
  }

  /** dti 0.99 is severe: a fresh agent goes to hold at once, then alert, alert, collapse. */
  const risky = (agent: string) => ({ agent_id: agent, event_type: 'output_generated', payload: {}, dti: 0.99 });
  const clean = (agent: string) => ({ agent_id: agent, event_type: 'output_generated', payload: {} });

  async function ingest(body: unknown): Promise<any> {
    const res = await call(server.url, 'POST', '/events/', { key: writerKey, body });
    expect(res.status).toBe(200);
    return res.body;
  }

  /** Ingests risky events until the agent collapses; returns every answer. */
  async function collapse(agent: string): Promise<any[]> {
    const answers = [];
    do answers.push(await ingest(risky(agent)));
    while (answers.at(-1).gate_status !== 'collapse' && answers.length < 10);
    expect(answers.at(-1).gate_status).toBe('collapse');
    return answers;
  }

  async function reviews(query = '', key = alice): Promise<any[]> {
    const res = await call(server.readUrl, 'GET', `/reviews${query}`, { key });
    expect(res.status, res.text).toBe(200);
    return res.body;
  }

  function decide(actionId: number | string, body: unknown, key: string | null = alice) {
    return call(server.url, 'POST', `/reviews/${actionId}`, { key, body });
  }

  async function exportAll(): Promise<any[]> {
    return parseLines((await call(server.readUrl, 'GET', '/audit/export')).text);
  }

  async function agentView(id: string): Promise<any> {
    return (await call(server.readUrl, 'GET', `/agents/${id}`)).body;
  }

  describe('GET /reviews', () => {
    it('lists held actions awaiting review, oldest first, with their decision fields', async () => {
      const agent = await newAgent();
      const pass = await ingest(clean(agent));
      const hold = await ingest(risky(agent));
      const alert = await ingest(risky(agent));
      expect([pass.gate_status, hold.gate_status, alert.gate_status]).toEqual(['pass', 'hold', 'alert']);

      const pending = await reviews(`?agent_id=${agent}`);
      expect(pending.map((i) => i.action_id)).toEqual([hold.action_id, alert.action_id]);
      const rows = await exportAll();
      for (const [item, answer] of [
        [pending[0], hold],
        [pending[1], alert],
      ]) {
        expect(Object.keys(item).sort()).toEqual(ITEM_FIELDS);
        const row = rows.find((r) => r.kind === 'event' && r.body.action_id === answer.action_id);
        expect(item).toEqual({
          action_id: answer.action_id,
          event_id: answer.event_id,
          agent_id: agent,
          gate: answer.gate_status,
          bii: answer.bii,
          reason: answer.reason,
          event_type: 'output_generated',
          recorded_at: row.recorded_at,
          ledger_seq: row.seq,
          status: 'pending',
          note: null,
          reviewer: null,
          decided_at: null,
        });
      }
      expect(await reviews(`?agent_id=${agent}&status=decided`)).toEqual([]);
      expect((await reviews('?limit=1')).length).toBe(1);
    });

    it('needs the review scope and refuses a bad status or limit', async () => {
      expect((await call(server.readUrl, 'GET', '/reviews', { key: null })).status).toBe(401);
      const forbidden = await call(server.readUrl, 'GET', '/reviews', { key: writerKey });
      expect(forbidden.status).toBe(403);
      expect(forbidden.body.error.code).toBe('forbidden');
      expect((await call(server.readUrl, 'GET', '/reviews')).status).toBe(200); // the admin key holds every scope
      for (const query of ['?status=bogus', '?limit=0', '?limit=501']) {
        const res = await call(server.readUrl, 'GET', `/reviews${query}`, { key: alice });
        expect(res.status, query).toBe(400);
        expect(res.body.error.code).toBe('validation_failed');
        expect(res.body.error.details[0].path).toBe(query.includes('status') ? 'status' : 'limit');
      }
    });
  });

  describe('POST /reviews/{action_id}', () => {
    it('refuses bad decisions with 400, unknown and never-held actions with 404, and needs the review scope', async () => {
      const agent = await newAgent();
      const pass = await ingest(clean(agent));
      const hold = await ingest(risky(agent));
      const before = (await exportAll()).length;
      for (const [body, path] of [
        [{ outcome: 'approved' }, 'outcome'],
        [{ note: 'no outcome' }, 'outcome'],
        [{ outcome: 'released', note: 'x'.repeat(2001) }, 'note'],
        [{ outcome: 'released', extra: 1 }, 'extra'],
      ] as const) {
        const res = await decide(hold.action_id, body);
        expect(res.status, JSON.stringify(body).slice(0, 60)).toBe(400);
        expect(res.body.error.details.map((d: { path: string }) => d.path)).toEqual([path]);
      }
      for (const id of [999_999, pass.action_id, 'abc', 0]) {
        const res = await decide(id, { outcome: 'released' });
        expect(res.status, String(id)).toBe(404);
        expect(res.body.error.code).toBe('not_found');
      }
      expect((await decide(hold.action_id, { outcome: 'released' }, writerKey)).status).toBe(403);
      expect((await decide(hold.action_id, { outcome: 'released' }, null)).status).toBe(401);
      expect((await exportAll()).length).toBe(before);
      expect((await reviews(`?agent_id=${agent}`)).map((i) => i.status)).toEqual(['pending']);
    });

    it('releases once (a second decision is 409) and lists the decision under decided', async () => {
      const agent = await newAgent();
      const hold = await ingest(risky(agent));
      const res = await decide(hold.action_id, { outcome: 'released', note: 'false alarm' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        action_id: hold.action_id,
        event_id: hold.event_id,
        agent_id: agent,
        outcome: 'released',
        note: 'false alarm',
        reviewer: 'alice',
        held_gate: 'hold',
        // The release vouches for the agent: it is back at the pass line.
        gate_status: 'pass',
        bii: 0.75,
        decided_at: expect.any(String),
      });
      for (const outcome of ['released', 'rejected', 'escalated']) {
        const again = await decide(hold.action_id, { outcome });
        expect(again.status, outcome).toBe(409);
        expect(again.body.error.code).toBe('conflict');
      }
      expect(await reviews(`?agent_id=${agent}`)).toEqual([]);
      const [decided] = await reviews(`?agent_id=${agent}&status=decided`);
      expect(decided).toMatchObject({
        action_id: hold.action_id,
        status: 'released',
        note: 'false alarm',
        reviewer: 'alice',
        decided_at: res.body.decided_at,
      });
    });

    it('keeps an escalated action open until it is released or rejected; an unnamed key is named by its id', async () => {
      const agent = await newAgent();
      const first = await ingest(risky(agent));
      const second = await ingest(risky(agent));
      expect((await decide(first.action_id, { outcome: 'escalated', note: 'needs security' })).status).toBe(200);
      expect((await decide(second.action_id, { outcome: 'escalated' }, anonymous.key)).status).toBe(200);
      const open = await reviews(`?agent_id=${agent}`);
      expect(open.map((i) => [i.action_id, i.status, i.note, i.reviewer])).toEqual([
        [first.action_id, 'escalated', 'needs security', 'alice'],
        [second.action_id, 'escalated', '', anonymous.id],
      ]);
      expect(await reviews(`?agent_id=${agent}&status=decided`)).toEqual([]);

      const released = await decide(first.action_id, { outcome: 'released', note: 'security says fine' }, anonymous.key);
      expect(released.status).toBe(200);
      expect(released.body.reviewer).toBe(anonymous.id);
      const rejected = await decide(second.action_id, { outcome: 'rejected', note: 'not allowed' });
      expect(rejected.status).toBe(200);
      expect(await reviews(`?agent_id=${agent}`)).toEqual([]);
      // Newest first.
      expect((await reviews(`?agent_id=${agent}&status=decided`)).map((i) => [i.action_id, i.status, i.note, i.reviewer])).toEqual([
        [second.action_id, 'rejected', 'not allowed', 'alice'],
        [first.action_id, 'released', 'security says fine', anonymous.id],
      ]);
      expect((await decide(second.action_id, { outcome: 'released' })).status).toBe(409);
    });

    it('takes exactly one of two concurrent final decisions', async () => {
      const agent = await newAgent();
      const hold = await ingest(risky(agent));
      const results = await Promise.all([
        decide(hold.action_id, { outcome: 'released', note: 'one' }),
        decide(hold.action_id, { outcome: 'rejected', note: 'two' }, anonymous.key),
      ]);
      expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
      const winner = results.find((r) => r.status === 200)!.body;
      const records = (await exportAll()).filter((r) => r.kind === 'review' && r.body.action_id === hold.action_id);
      expect(records.map((r) => r.body.outcome)).toEqual([winner.outcome]);
      expect((await reviews(`?agent_id=${agent}&status=decided`)).map((i) => i.status)).toEqual([winner.outcome]);
    });

    it('keeps orgs apart: another org neither sees nor decides our held actions', async () => {
      const agent = await newAgent();
      const hold = await ingest(risky(agent));
      const cli = await runCli(['keys', 'create', '--org', 'globex', '--scopes', 'review'], server.cliEnv);
      const foreign = cli.stdout.trim().split('\n').at(-1)!;
      await server.settle(foreign);
      expect(await reviews('', foreign)).toEqual([]);
      expect((await decide(hold.action_id, { outcome: 'released' }, foreign)).status).toBe(404);
      expect((await reviews(`?agent_id=${agent}`)).map((i) => i.status)).toEqual(['pending']);
    });

    it('writes each decision as a review ledger record, and the chain still verifies', async () => {
      const agent = await newAgent();
      const hold = await ingest(risky(agent));
      const res = await decide(hold.action_id, { outcome: 'rejected', note: 'bad output' });
      const rows = await exportAll();
      const record = rows.at(-1);
      expect(record.kind).toBe('review');
      expect(record.agent_id).toBe(agent);
      expect(record.recorded_at).toBe(res.body.decided_at);
      expect(record.body).toEqual({
        action_id: hold.action_id,
        event_id: hold.event_id,
        outcome: 'rejected',
        note: 'bad output',
        reviewer: 'alice',
        held_gate: 'hold',
        gate_status: 'hold',
        bii: hold.bii,
      });
      const verify = await call(server.readUrl, 'GET', `/audit/${agent}/verify`);
      expect(verify.status).toBe(200);
      expect(verify.body).toMatchObject({ ok: true, first_bad_seq: null, length: rows.length });
    });
  });

  describe('decisions and the agent gate', () => {
    it('releasing the collapse-gated action of a collapsed agent lifts it to pass at BII 0.75', async () => {
      const agent = await newAgent();
      const answers = await collapse(agent);
      const collapsed = answers.at(-1);
      expect(await agentView(agent)).toMatchObject({ gate: 'collapse' });
      // Releasing an action older than the agent's latest risky signal does not lift a collapse.
      const early = await decide(answers[0].action_id, { outcome: 'released' });
      expect(early.body).toMatchObject({ held_gate: 'hold', gate_status: 'collapse' });
      expect((await agentView(agent)).gate).toBe('collapse');

      const res = await decide(collapsed.action_id, { outcome: 'released', note: 'vouched' });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ held_gate: 'collapse', gate_status: 'pass', bii: 0.75 });
      expect(await agentView(agent)).toMatchObject({ gate: 'pass', bii: 0.75 });
      // The writer knows it too: a clean event scores from 0.75 instead of staying collapsed.
      const next = await ingest(clean(agent));
      expect(next.gate_status).toBe('pass');
      expect(next.bii).toBeGreaterThan(0.75);
    });

    it('a release keeps a BII already at the pass line, and the gate becomes pass', async () => {
      const agent = await newAgent();
      const collapsed = (await collapse(agent)).at(-1);
      let last;
      do last = await ingest(clean(agent)); // collapse is sticky while the BII recovers
      while (last.bii < 0.75);
      expect(last.gate_status).toBe('collapse');
      const res = await decide(collapsed.action_id, { outcome: 'released' });
      expect(res.body).toMatchObject({ gate_status: 'pass', bii: last.bii });
      expect(await agentView(agent)).toMatchObject({ gate: 'pass', bii: last.bii });
    });

    it('rejecting or escalating leaves a collapsed agent collapsed', async () => {
      const agent = await newAgent();
      const answers = await collapse(agent);
      const collapsed = answers.at(-1);
      expect((await decide(collapsed.action_id, { outcome: 'escalated' })).body.gate_status).toBe('collapse');
      const res = await decide(collapsed.action_id, { outcome: 'rejected', note: 'keep it down' });
      expect(res.body).toMatchObject({ held_gate: 'collapse', gate_status: 'collapse', bii: collapsed.bii });
      expect(await agentView(agent)).toMatchObject({ gate: 'collapse', bii: collapsed.bii });
      expect((await ingest(clean(agent))).gate_status).toBe('collapse');
    });
  });

  describe('review webhooks', () => {
    let receiver: Receiver;
    afterAll(() => receiver.close());

    it('sends review.<outcome> with the outcome, reviewer and note, signed', async () => {
      receiver = await startReceiver();
      const created = await call(server.ownerUrl, 'POST', '/webhooks', {
        body: { url: receiver.url(), events: ['review.released', 'review.rejected', 'review.escalated'] },
      });
      expect(created.status).toBe(200);
      const { id, secret } = created.body;
      const agent = await newAgent();
      const first = await ingest(risky(agent));
      const second = await ingest(risky(agent));
      const decisions = [
        [first.action_id, 'escalated', 'a second look', alice],
        [first.action_id, 'released', 'looked twice: fine', anonymous.key],
        [second.action_id, 'rejected', 'no', alice],
      ] as const;
      for (const [action, outcome, note, key] of decisions) expect((await decide(action, { outcome, note }, key)).status).toBe(200);

      await waitFor(() => receiver.received.length === 3, 5_000, 'three review deliveries');
      const rows = await exportAll();
      for (const [action, outcome, note] of decisions) {
        const request = receiver.received.find((q) => q.headers['x-vigil-event'] === `review.${outcome}`)!;
        expect(request, outcome).toBeDefined();
        const envelope: any = verifyWebhook(request.body, request.headers['x-vigil-signature'] as string, secret);
        const row = rows.find((r) => r.kind === 'review' && r.body.action_id === action && r.body.outcome === outcome);
        expect(envelope).toMatchObject({ id: request.headers['x-vigil-delivery'], event: `review.${outcome}`, org: 'acme', created_at: row.recorded_at });
        expect(envelope.data).toEqual({
          agent_id: agent,
          action_id: action,
          event_id: action,
          gate_status: row.body.gate_status,
          bii: row.body.bii,
          reason: note,
          policy_digest: expect.stringMatching(/^[0-9a-f]{64}$/),
          ledger_seq: row.seq,
          outcome,
          reviewer: outcome === 'released' ? anonymous.id : 'alice',
          held_gate: row.body.held_gate,
        });
      }
      // Gate events were not subscribed to: only the three review deliveries were made.
      expect((await call(server.ownerUrl, 'GET', `/webhooks/${id}/deliveries`)).body.map((d: any) => d.event).sort()).toEqual(
        ['review.escalated', 'review.rejected', 'review.released'],
      );
      await call(server.ownerUrl, 'DELETE', `/webhooks/${id}`);
    });
  });

  describe('restarts', () => {
    it('keeps the queue and the decisions across a clean restart', async () => {
      const agent = await newAgent();
      const [a, b, c] = [await ingest(risky(agent)), await ingest(risky(agent)), await ingest(risky(agent))];
      expect((await decide(a.action_id, { outcome: 'released' })).status).toBe(200);
      expect((await decide(b.action_id, { outcome: 'escalated', note: 'later' })).status).toBe(200);
      const pending = await reviews('?limit=500');
      const decided = await reviews('?status=decided&limit=500');
      expect(pending.some((i) => i.action_id === c.action_id)).toBe(true);

      await server.restart();
      expect(await reviews('?limit=500')).toEqual(pending);
      expect(await reviews('?status=decided&limit=500')).toEqual(decided);
      expect((await decide(a.action_id, { outcome: 'rejected' })).status).toBe(409);
      expect((await decide(b.action_id, { outcome: 'rejected' })).status).toBe(200);
      expect((await decide(c.action_id, { outcome: 'released' })).status).toBe(200);
      expect((await call(server.readUrl, 'GET', `/audit/${agent}/verify`)).body.ok).toBe(true);
    });

    m.embeddedOnly('a kill -9 of one `vigil serve` process and its replay of its own ledger')('rebuilds the queue and the decisions from the ledger after kill -9 (no checkpoint)', async () => {
      const dir = tempDir();
      let child = await spawnServer(dir, ENV);
      const at = (url: string) => ({
        post: (path: string, body: unknown) => call(url, 'POST', path, { body }),
        get: async (path: string) => (await call(url, 'GET', path)).body,
      });
      try {
        let api = at(child.url);
        await api.post('/agents/', { agent_id: 'k', name: 'K' });
        const actions = [];
        for (let i = 0; i < 4; i++) actions.push((await api.post('/events/', risky('k'))).body);
        expect(actions.at(-1).gate_status).toBe('collapse');
        expect((await api.post(`/reviews/${actions[0].action_id}`, { outcome: 'rejected' })).status).toBe(200);
        expect((await api.post(`/reviews/${actions[1].action_id}`, { outcome: 'escalated' })).status).toBe(200);
        expect((await api.post(`/reviews/${actions[3].action_id}`, { outcome: 'released' })).body.gate_status).toBe('pass');
        const pending = await api.get('/reviews?limit=500');
        const decided = await api.get('/reviews?status=decided&limit=500');
        const view = await api.get('/agents/k');
        child.child.kill('SIGKILL');
        await child.exited;

        child = await spawnServer(dir, ENV);
        api = at(child.url);
        expect(await api.get('/reviews?limit=500')).toEqual(pending);
        expect(await api.get('/reviews?status=decided&limit=500')).toEqual(decided);
        expect(await api.get('/agents/k')).toEqual(view);
        expect((await api.post(`/reviews/${actions[3].action_id}`, { outcome: 'released' })).status).toBe(409);
        expect((await api.post(`/reviews/${actions[1].action_id}`, { outcome: 'released' })).status).toBe(200);
        // The writer replayed the release too: a clean event scores from pass, not collapse.
        expect((await api.post('/events/', clean('k'))).body.gate_status).toBe('pass');
      } finally {
        child.child.kill('SIGTERM');
        await child.exited;
        removeDir(dir);
      }
    });
  });
});
