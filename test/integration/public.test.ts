import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeModes, type ModeServers } from '../support/modes.js';
import { ADMIN_KEY, call, ORG, runCli } from '../support/server.js';

describeModes('public records', (m) => {
  let server: ModeServers;
  let otherKey: string;
  let writerKey: string;

  beforeAll(async () => {
    server = await m.start({ VIGIL_PUBLIC_RATE_LIMIT: '1000', VIGIL_APP_URL: 'https://vigil.example' });
    writerKey = (await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'] } })).body.key;
    const cli = await runCli(['keys', 'create', '--org', 'initech', '--scopes', 'admin,events:write'], server.cliEnv);
    otherKey = cli.stdout.trim().split('\n').at(-1)!;
    await server.settle(writerKey, otherKey);
    for (const [agent_id, name] of [['pub', 'Public Bot'], ['priv', 'Private Bot'], ['gone', 'Retired Bot'], ['zeta', 'Zeta']]) {
      await call(server.url, 'POST', '/agents/', { body: { agent_id, name } });
    }
    await call(server.url, 'POST', '/agents/', { key: otherKey, body: { agent_id: 'theirs', name: 'Theirs' } });
    await call(server.url, 'PATCH', '/admin/agents/theirs', { key: otherKey, body: { public: true } });
  });
  afterAll(() => server.close());

  /**
   * Public reads are served from memory and, in cluster mode, may trail by the replication lag
   * (DESIGN §8): each first waits until every node holds both orgs' last batches.
   */
  const get = async (path: string, headers: Record<string, string> = {}) => {
    await server.settle(ADMIN_KEY, otherKey);
    return call(server.readUrl, 'GET', path, { key: null, headers });
  };

  describe('PATCH /admin/agents/{agent_id}', () => {
    it('publishes an agent with links and answers the updated agent', async () => {
      const res = await call(server.url, 'PATCH', '/admin/agents/pub', {
        body: { public: true, public_links: [{ kind: 'website', url: 'https://pub.example/about' }, { kind: 'code_host', url: 'http://git.example/pub' }] },
      });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ agent_id: 'pub', public: true, is_active: true });
      expect(res.body.public_links).toHaveLength(2);
    });

    it('records every change as an agent ledger record', async () => {
      const rows = (await call(server.readUrl, 'GET', '/audit/export?agent_id=pub')).text.trim().split('\n').map((l) => JSON.parse(l));
      const change = rows.find((r) => r.body.action === 'update');
      expect(change.kind).toBe('agent');
      expect(change.body.changes.public).toBe(true);
    });

    it('validates links, kinds and fields with 400 naming the path, and changes nothing', async () => {
      const cases: [unknown, string][] = [
        [{ public_links: Array.from({ length: 6 }, () => ({ kind: 'other', url: 'https://x.example' })) }, 'public_links'],
        [{ public_links: [{ kind: 'blog', url: 'https://x.example' }] }, 'public_links.0.kind'],
        [{ public_links: [{ kind: 'other', url: 'javascript:alert(1)' }] }, 'public_links.0.url'],
        [{ public_links: [{ kind: 'other', url: 'ftp://x.example' }] }, 'public_links.0.url'],
        [{ public_links: [{ kind: 'other', url: `https://x.example/${'a'.repeat(190)}` }] }, 'public_links.0.url'],
        [{ public: 'yes' }, 'public'],
        [{ kind: 'robot' }, 'kind'],
        [{ owner: 'me' }, 'owner'],
        [{}, 'body'],
      ];
      for (const [body, path] of cases) {
        const res = await call(server.url, 'PATCH', '/admin/agents/pub', { body });
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
      }
      expect((await get('/public/agents/acme/pub')).body.public_links).toHaveLength(2);
    });

    it('needs an admin key of the agent own org: 403 for other scopes, 404 for another org agent', async () => {
      expect((await call(server.url, 'PATCH', '/admin/agents/pub', { key: writerKey, body: { public: false } })).status).toBe(403);
      const foreign = await call(server.url, 'PATCH', '/admin/agents/theirs', { body: { public: false } });
      expect(foreign.status).toBe(404);
      expect((await call(server.url, 'PATCH', '/admin/agents/nobody', { body: { public: true } })).status).toBe(404);
      expect((await get('/public/agents/initech/theirs')).status).toBe(200);
    });

    it('replaces public_links whole; an empty list clears them', async () => {
      await call(server.url, 'PATCH', '/admin/agents/zeta', { body: { public: true, public_links: [{ kind: 'social', url: 'https://s.example/z' }] } });
      await call(server.url, 'PATCH', '/admin/agents/zeta', { body: { public_links: [{ kind: 'other', url: 'https://o.example' }] } });
      expect((await get('/public/agents/acme/zeta')).body.public_links).toEqual([{ kind: 'other', url: 'https://o.example' }]);
      await call(server.url, 'PATCH', '/admin/agents/zeta', { body: { public_links: [] } });
      expect((await get('/public/agents/acme/zeta')).body.public_links).toEqual([]);
    });

    it('retires permanently: public routes 404, events 409, reactivation 409', async () => {
      await call(server.url, 'PATCH', '/admin/agents/gone', { body: { public: true } });
      expect((await get('/public/agents/acme/gone')).status).toBe(200);
      const retired = await call(server.url, 'PATCH', '/admin/agents/gone', { body: { is_active: false } });
      expect(retired.status).toBe(200);
      expect(retired.body.is_active).toBe(false);
      expect((await get('/public/agents/acme/gone')).status).toBe(404);
      const event = await call(server.url, 'POST', '/events/', { body: { agent_id: 'gone', event_type: 'output_generated', payload: {} } });
      expect(event.status).toBe(409);
      expect(event.body.error.code).toBe('conflict');
      expect((await call(server.url, 'PATCH', '/admin/agents/gone', { body: { is_active: true } })).status).toBe(409);
    });

    it('renames, changes kind and observed', async () => {
      const res = await call(server.url, 'PATCH', '/admin/agents/zeta', { body: { name: 'Zeta Two', kind: 'sandbox', observed: false } });
      expect(res.body).toMatchObject({ name: 'Zeta Two', kind: 'sandbox', observed: false });
      expect((await get('/public/agents/acme/zeta')).body).toMatchObject({ name: 'Zeta Two', kind: 'sandbox', observed: false });
    });
  });

  describe('GET /public/agents/{org}/{agent_id}', () => {
    it('answers exactly the 2.1 fields, with ledger_head equal to the verify head', async () => {
      await call(server.url, 'POST', '/events/', { body: { agent_id: 'pub', event_type: 'output_generated', payload: { secret: 'do-not-leak' } } });
      const res = await get('/public/agents/acme/pub');
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(
        ['org', 'agent_id', 'name', 'kind', 'gate', 'bii', 'ledger_records', 'ledger_head', 'last_event_at', 'observed', 'policy_digest', 'public_links', 'verify_url'].sort(),
      );
      expect(res.text).not.toContain('do-not-leak');
      const verify = await call(server.readUrl, 'GET', '/audit/pub/verify');
      expect(res.body.ledger_head).toBe(verify.body.head);
      expect(res.body.ledger_records).toBe(verify.body.agent_records);
      expect(res.body).toMatchObject({ org: ORG, agent_id: 'pub', name: 'Public Bot', gate: 'pass', kind: 'production' });
      expect(res.body.verify_url).toBe('https://vigil.example/a/acme/pub/verify');
      expect(res.body.policy_digest).toMatch(/^[0-9a-f]{64}$/);
    });

    it('answers byte-identical 404s for every reason', async () => {
      await call(server.url, 'POST', '/agents/', { key: otherKey, body: { agent_id: 'hidden', name: 'H' } });
      const answers = await Promise.all(
        ['/public/agents/acme/priv', '/public/agents/acme/gone', '/public/agents/acme/nobody', '/public/agents/initech/pub', '/public/agents/nowhere/pub', '/public/agents/acme/bad%20id'].map(
          (p) => get(p),
        ),
      );
      for (const a of answers) expect(a.status).toBe(404);
      expect(new Set(answers.map((a) => a.text)).size).toBe(1);
    });

    it('sends cache, CORS and rate-limit headers, and ETag with 304 on If-None-Match', async () => {
      const res = await get('/public/agents/acme/pub');
      expect(res.headers.get('cache-control')).toBe('public, max-age=60');
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('x-ratelimit-limit')).toBe('1000');
      expect(Number(res.headers.get('x-ratelimit-remaining'))).toBeGreaterThan(0);
      expect(Number(res.headers.get('x-ratelimit-reset'))).toBeGreaterThan(0);
      const etag = res.headers.get('etag')!;
      expect(etag).toMatch(/^".+"$/);
      const again = await get('/public/agents/acme/pub', { 'if-none-match': etag });
      expect(again.status).toBe(304);
      expect(again.text).toBe('');
      await call(server.url, 'POST', '/events/', { body: { agent_id: 'pub', event_type: 'output_generated', payload: {} } });
      const changed = await get('/public/agents/acme/pub', { 'if-none-match': etag });
      expect(changed.status).toBe(200);
      expect(changed.headers.get('etag')).not.toBe(etag);
    });

    it('answers an OPTIONS preflight', async () => {
      const res = await fetch(`${server.readUrl}/public/agents/acme/pub`, { method: 'OPTIONS', headers: { origin: 'https://elsewhere.example', 'access-control-request-method': 'GET' } });
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('access-control-allow-methods')).toContain('GET');
    });

    it('refuses a request carrying Authorization with 400', async () => {
      const res = await call(server.readUrl, 'GET', '/public/agents/acme/pub');
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('bad_request');
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect((await call(server.readUrl, 'GET', '/public/agents/acme')).status).toBe(400);
    });
  });

  describe('GET /public/agents/{org}', () => {
    it('lists public active agents by agent_id with total, limit and offset', async () => {
      const res = await get('/public/agents/acme');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ org: 'acme', total: 2, limit: 50, offset: 0 });
      expect(res.body.agents.map((a: { agent_id: string }) => a.agent_id)).toEqual(['pub', 'zeta']);
      const page = await get('/public/agents/acme?limit=1&offset=1');
      expect(page.body).toMatchObject({ total: 2, limit: 1, offset: 1 });
      expect(page.body.agents.map((a: { agent_id: string }) => a.agent_id)).toEqual(['zeta']);
      expect(page.body.agents[0]).toEqual((await get('/public/agents/acme/zeta')).body);
    });

    it('refuses limit and offset out of range with 400', async () => {
      for (const q of ['limit=0', 'limit=101', 'limit=abc', 'limit=1.5', 'offset=-1', 'offset=x']) {
        const res = await get(`/public/agents/acme?${q}`);
        expect(res.status, q).toBe(400);
        expect(res.body.error.code).toBe('validation_failed');
      }
    });

    it('answers the same 404 for an org with no public agent and an unknown org', async () => {
      const none = await call(server.url, 'POST', '/agents/', { key: otherKey, body: { agent_id: 'x', name: 'x' } });
      expect(none.status).toBe(201);
      await call(server.url, 'PATCH', '/admin/agents/theirs', { key: otherKey, body: { public: false } });
      const a = await get('/public/agents/initech');
      const b = await get('/public/agents/nowhere');
      const c = await get('/public/agents/initech/theirs');
      expect([a.status, b.status, c.status]).toEqual([404, 404, 404]);
      expect(a.text).toBe(b.text);
      expect(a.text).toBe(c.text);
    });
  });

  describe('public rate limit', () => {
    it('answers 429 with Retry-After past VIGIL_PUBLIC_RATE_LIMIT a minute per address', async () => {
      // The limit is kept by each process: in cluster mode every request goes to one node.
      const limited = await m.start({ VIGIL_PUBLIC_RATE_LIMIT: '3' });
      try {
        const statuses: number[] = [];
        let last: Awaited<ReturnType<typeof call>> | undefined;
        for (let i = 0; i < 5; i++) {
          last = await call(limited.readUrl, 'GET', '/public/agents/acme/none', { key: null });
          statuses.push(last.status);
        }
        expect(statuses).toEqual([404, 404, 404, 429, 429]);
        expect(last!.body.error.code).toBe('rate_limited');
        expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
        expect(last!.headers.get('x-ratelimit-remaining')).toBe('0');
        const page = await call(limited.readUrl, 'GET', '/a/acme/none', { key: null });
        expect(page.status).toBe(429);
      } finally {
        await limited.close();
      }
    });
  });

  describe('restart', () => {
    it('rebuilds public records from the ledger', async () => {
      const before = await get('/public/agents/acme/pub');
      await server.restart();
      const after = await get('/public/agents/acme/pub');
      expect(after.body).toEqual(before.body);
      expect(after.headers.get('etag')).toBe(before.headers.get('etag'));
    });
  });
});
