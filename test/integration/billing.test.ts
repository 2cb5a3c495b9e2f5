import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { monthOf } from '../../src/domain/billing.js';
import { startReceiver, waitFor } from '../support/receiver.js';
import { describeModes, type ModeServers } from '../support/modes.js';
import { call, runCli } from '../support/server.js';

describeModes('billing', (m) => {
  let server: ModeServers;

  beforeAll(async () => {
    server = await m.start({ VIGIL_WEBHOOK_ALLOW_PRIVATE: '1' });
  });
  afterAll(() => server.close());

  // The month is read where it is used, never once per file: a run may cross a UTC month boundary.
  // Statements are asked of the owner node: they count webhook deliveries, which cluster mode still
  // keeps per node (ModeServers.ownerUrl).
  const statementOf = async (url: string, month = monthOf(Date.now())) => (await call(url, 'GET', `/billing/statement?month=${month}`)).body;
  /**
   * The CLI writes the plan to the data dir, or in cluster mode to the KV bucket, which every node's
   * watch applies within milliseconds: wait until every node shows it (at once in embedded mode).
   */
  const planApplies = (plan: string) =>
    server.eventually(`plan ${plan} on every node`, async () =>
      (await Promise.all(server.nodes.map((node) => call(node.url, 'GET', '/billing/plan')))).every((res) => res.body.plan === plan),
    );

  describe('billing', () => {
    it('starts on the free plan; the CLI sets a plan and billing e-mail that apply at once', async () => {
      const plan = await call(server.readUrl, 'GET', '/billing/plan');
      expect(plan.status).toBe(200);
      expect(plan.body).toEqual({
        org: 'acme',
        plan: 'free',
        limits: { events_per_month: 100_000, agents: 100, webhooks: 10, public_agents: 100, exports_per_month: 20 },
        billing_email: null,
        plan_price: '0.00',
        currency: 'USD',
        upgrade: expect.stringMatching(/\/pricing$/),
      });
      const page = await fetch(plan.body.upgrade.replace(/^http:\/\/[^/]+/, server.readUrl));
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('orgs set-plan');

      const env = server.cliEnv;
      expect((await runCli(['orgs', 'set-plan', '--org', 'acme', '--plan', 'gold'], env)).code).toBe(2);
      expect((await runCli(['orgs', 'set-plan', '--org', 'No Body', '--plan', 'team'], env)).code).toBe(2);
      const set = await runCli(['orgs', 'set-plan', '--org', 'acme', '--plan', 'team', '--billing-email', 'billing@acme.example'], env);
      expect(set.code).toBe(0);
      await planApplies('team');
      expect((await call(server.readUrl, 'GET', '/billing/plan')).body).toMatchObject({ plan: 'team', plan_price: '49.00', billing_email: 'billing@acme.example' });
    });

    it('refuses a malformed or future month; without one, the current month (UTC); before the org existed, nothing billed', async () => {
      const now = new Date();
      const next = monthOf(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 15));
      for (const query of ['?month=', '?month=2026-13', '?month=2026-1', '?month=26-01', '?month=2026-01-01', `?month=${next}`, '?month=9999-12']) {
        const res = await call(server.ownerUrl, 'GET', `/billing/statement${query}`);
        expect(res.status, query).toBe(400);
        expect(res.body.error.details[0].path).toBe('month');
      }
      const current = await call(server.ownerUrl, 'GET', '/billing/statement');
      expect(current.status).toBe(200);
      // Unless the UTC month turned between the two requests.
      const month = monthOf(Date.now());
      if (current.body.month === month) expect(current.body).toEqual(await statementOf(server.ownerUrl, month));
      expect(current.body).toMatchObject({ org: 'acme', plan: 'team', plan_price: '49.00' });
      // The org was created by this test run: 2020-01 is before it existed.
      expect(await statementOf(server.ownerUrl, '2020-01')).toEqual({
        org: 'acme',
        month: '2020-01',
        plan: 'team',
        limits: { events_per_month: 1_000_000, agents: 1_000, webhooks: 25, public_agents: 1_000, exports_per_month: 100 },
        usage: { events: 0, agents_active: 0, webhook_deliveries: 0, exports: 0 },
        plan_price: '0.00',
        overage: [],
        total: '0.00',
        currency: 'USD',
        upgrade: expect.stringMatching(/\/pricing$/),
      });
    });

    it('meters events, active agents, webhook deliveries and exports of the month, and keeps them over a restart', async () => {
      const receiver = await startReceiver(() => 204);
      try {
        const month = monthOf(Date.now());
        const hook = await call(server.ownerUrl, 'POST', '/webhooks', { body: { url: receiver.url(), events: ['gate.hold', 'gate.alert', 'gate.collapse'] } });
        expect(hook.status).toBe(200);
        for (const id of ['m1', 'm2', 'm3']) await call(server.url, 'POST', '/agents/', { body: { agent_id: id, name: id } });
        for (let i = 0; i < 4; i++) await call(server.url, 'POST', '/events/', { body: { agent_id: 'm1', event_type: 'output_generated', payload: {} } });
        await call(server.url, 'POST', '/events/', { body: { agent_id: 'm2', event_type: 'output_generated', payload: {}, dti: 0.99 } }); // held: one delivery
        const length = (await call(server.readUrl, 'GET', '/audit/m1/verify')).body.length;
        expect((await call(server.url, 'POST', '/exports/bundle', { body: { since_seq: 0, until_seq: length } })).status).toBe(200);

        // Delivered, so the count below is final (a queued delivery could still be cancelled).
        await waitFor(() => receiver.received.length === 1, 10_000, 'the held event\'s delivery');
        const statement = await statementOf(server.ownerUrl, month);
        expect(statement.usage).toEqual({ events: 5, agents_active: 2, webhook_deliveries: 1, exports: 1 });
        expect(statement).toMatchObject({ plan: 'team', plan_price: '49.00', overage: [], total: '49.00' });

        await server.restart();
        // The upgrade address names the bound port, which a restart changes.
        expect(await statementOf(server.ownerUrl, month)).toEqual({ ...statement, upgrade: expect.stringMatching(/\/pricing$/) });
      } finally {
        await receiver.close();
      }
    });

    it('refuses past a blocking limit with a clear error: agents and webhooks (403), exports a month (429)', async () => {
      expect((await runCli(['orgs', 'set-plan', '--org', 'acme', '--plan', 'free'], server.cliEnv)).code).toBe(0);
      await planApplies('free');
      // Free: 100 active agents; 3 exist.
      for (let i = 0; i < 97; i++) expect((await call(server.url, 'POST', '/agents/', { body: { agent_id: `f${i}`, name: `F${i}` } })).status).toBe(201);
      const agent = await call(server.url, 'POST', '/agents/', { body: { agent_id: 'one-too-many', name: 'X' } });
      expect(agent.status).toBe(403);
      expect(agent.body.error).toMatchObject({ code: 'plan_limit', message: expect.stringContaining('100 active agents') });
      // Retiring one frees a place.
      expect((await call(server.url, 'PATCH', '/admin/agents/f0', { body: { is_active: false } })).status).toBe(200);
      expect((await call(server.url, 'POST', '/agents/', { body: { agent_id: 'one-too-many', name: 'X' } })).status).toBe(201);

      // Free: 10 active webhooks; 1 exists.
      for (let i = 0; i < 9; i++) expect((await call(server.ownerUrl, 'POST', '/webhooks', { body: { url: `http://127.0.0.1:9/h${i}`, events: ['ping'] } })).status).toBe(200);
      const hook = await call(server.ownerUrl, 'POST', '/webhooks', { body: { url: 'http://127.0.0.1:9/h', events: ['ping'] } });
      expect(hook.status).toBe(403);
      expect(hook.body.error.code).toBe('plan_limit');

      // Free: 20 exports a month; 1 made.
      for (let i = 0; i < 19; i++) expect((await call(server.url, 'POST', '/exports/bundle', { body: { since_seq: 0, until_seq: 1 } })).status).toBe(200);
      const before = (await call(server.readUrl, 'GET', '/exports')).body.length;
      const refused = await call(server.url, 'POST', '/exports/bundle', { body: { since_seq: 0, until_seq: 1 } });
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe('quota_exceeded');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await call(server.readUrl, 'GET', '/exports')).body.length).toBe(before);
      expect((await statementOf(server.ownerUrl)).usage.exports).toBe(20);
    });

    it('bills overage on team through the real meter: exports past 100 at 1.00 each', async () => {
      expect((await runCli(['orgs', 'set-plan', '--org', 'acme', '--plan', 'team'], server.cliEnv)).code).toBe(0);
      await planApplies('team');
      const month = monthOf(Date.now());
      const made = (await statementOf(server.ownerUrl, month)).usage.exports;
      // Team bills exports past 100 instead of refusing them: 3 over the limit.
      for (let i = made; i < 103; i++) expect((await call(server.url, 'POST', '/exports/bundle', { body: { since_seq: 0, until_seq: 1 } })).status).toBe(200);
      const statement = await statementOf(server.ownerUrl, month);
      expect(statement.usage.exports).toBe(103);
      expect(statement).toMatchObject({
        plan: 'team',
        plan_price: '49.00',
        overage: [{ item: 'exports', quantity: 3, unit: 'export', unit_price: '1.00', amount: '3.00' }],
        total: '52.00',
        currency: 'USD',
      });
    });
  });
});
