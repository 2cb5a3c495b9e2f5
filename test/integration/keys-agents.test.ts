import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeModes, type ModeServers } from '../support/modes.js';
import { ADMIN_KEY, call, ORG, runCli } from '../support/server.js';

describeModes('keys and agents', (m) => {
  let server: ModeServers;
  beforeAll(async () => {
    server = await m.start();
  });
  afterAll(() => server.close());

  describe('health and org', () => {
    it('GET /health answers status, version and mode without a key', async () => {
      const res = await call(server.readUrl, 'GET', '/health', { key: null });
      expect(res.status).toBe(200);
      // Cluster mode adds the node and the partitions it owns (DESIGN §8): node 2 owns the one partition.
      if (m.mode === 'embedded') expect(res.body).toEqual({ status: 'ok', version: '0.2.0', mode: 'embedded' });
      else expect(res.body).toEqual({ status: 'ok', version: '0.2.0', mode: 'cluster', node: 'node-2', partitions_owned: [0] });
    });

    it('GET /orgs/me names the key org', async () => {
      const res = await call(server.readUrl, 'GET', '/orgs/me');
      expect(res.status).toBe(200);
      expect(res.body.slug).toBe(ORG);
      expect(res.body.key.scopes).toEqual(['events:write', 'review', 'admin', 'audit:read']);
    });

    it('answers 401 with the JSON error body for a missing, malformed or unknown key', async () => {
      for (const headers of [{}, { authorization: 'Basic abc' }, { authorization: 'Bearer vgl_nope' }] as Record<string, string>[]) {
        const res = await call(server.readUrl, 'GET', '/orgs/me', { key: null, headers });
        expect(res.status).toBe(401);
        expect(res.body.error.code).toBe('unauthorized');
        expect(typeof res.body.error.message).toBe('string');
      }
    });

    it('answers 404 JSON for an unknown route', async () => {
      const res = await call(server.readUrl, 'GET', '/nothing/here');
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    });
  });

  describe('keys', () => {
    it('POST /admin/keys creates a working key in the caller org, stored only as a hash', async () => {
      const res = await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'], name: 'runtime-1' } });
      expect(res.status).toBe(201);
      expect(res.body.key).toMatch(/^vgl_[A-Za-z0-9_-]{32,}$/);
      expect(res.body).toMatchObject({ scopes: ['events:write'], name: 'runtime-1' });
      expect(res.body.id).toMatch(/^key_/);
      // Asked of the node that made it, which knows it at once in cluster mode too (README).
      const me = await call(server.url, 'GET', '/orgs/me', { key: res.body.key });
      expect(me.body.slug).toBe(ORG);
    });

    it('POST /admin/keys refuses bad scopes with 400 naming the field, and non-admin keys with 403', async () => {
      const bad = await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['root'] } });
      expect(bad.status).toBe(400);
      expect(bad.body.error.details[0].path).toBe('scopes.0');
      const writer = await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'] } });
      const forbidden = await call(server.url, 'POST', '/admin/keys', { key: writer.body.key, body: { scopes: ['admin'] } });
      expect(forbidden.status).toBe(403);
      expect(forbidden.body.error.code).toBe('forbidden');
    });

    it('the CLI creates a key against the store of a running server (its data dir, or the cluster), which accepts it at once', async () => {
      const out = await runCli(['keys', 'create', '--org', 'cli-org', '--scopes', 'events:write,review', '--name', 'ops'], server.cliEnv);
      expect(out.code).toBe(0);
      const key = out.stdout.trim().split('\n').at(-1)!;
      expect(key).toMatch(/^vgl_/);
      // Cluster mode: each node's KV watch applies the key within milliseconds (README), so wait for it.
      await server.settle(key);
      const me = await call(server.readUrl, 'GET', '/orgs/me', { key });
      expect(me.status).toBe(200);
      expect(me.body.slug).toBe('cli-org');
      expect(me.body.key.scopes).toEqual(['events:write', 'review']);
    });

    it('the CLI revokes a key against a running server (or the cluster): refused from then on, on every node, and other keys still work', async () => {
      const created = await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'], name: 'leaving' } });
      await server.settle(created.body.key);
      expect((await call(server.readUrl, 'GET', '/orgs/me', { key: created.body.key })).status).toBe(200);
      const out = await runCli(['keys', 'revoke', created.body.id], server.cliEnv);
      expect(out).toMatchObject({ code: 0, stderr: '' });
      expect(JSON.parse(out.stdout)).toEqual({ id: created.body.id, org: ORG, revoked_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
      for (const url of new Set([server.url, server.readUrl])) {
        // Embedded: at once. Cluster: once the node's KV watch applied it (milliseconds).
        await expect.poll(async () => (await call(url, 'GET', '/orgs/me', { key: created.body.key })).status, { timeout: 5_000 }).toBe(401);
        const refused = await call(url, 'POST', '/events', { key: created.body.key, body: { agent_id: 'nobody', event_type: 'output_generated', payload: {} } });
        expect(refused.status).toBe(401);
        expect(refused.body.error).toMatchObject({ code: 'unauthorized', message: 'this API key was revoked' });
        expect((await call(url, 'GET', '/orgs/me')).status).toBe(200);
      }
      // Again: nothing changes; an unknown id is refused in one line.
      expect(await runCli(['keys', 'revoke', created.body.id], server.cliEnv)).toMatchObject({ code: 0 });
      expect(await runCli(['keys', 'revoke', 'key_nope'], server.cliEnv)).toMatchObject({ code: 1, stdout: '', stderr: 'vigil keys: key key_nope not found\n' });
    });

    it('GET /admin/keys lists the org\'s keys (never a secret), with when each was last used; DELETE /admin/keys/{id} revokes one at once', async () => {
      const created = await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'], name: 'runtime-to-revoke' } });
      expect(created.status).toBe(201);
      const listed = async (): Promise<Record<string, unknown>[]> => {
        const res = await call(server.url, 'GET', '/admin/keys');
        expect(res.status).toBe(200);
        expect(res.text).not.toMatch(/vgl_|"hash"|"key"/);
        return res.body;
      };
      const before = (await listed()).find((k) => k.id === created.body.id);
      expect(before).toEqual({ id: created.body.id, name: 'runtime-to-revoke', scopes: ['events:write'], created_at: expect.stringMatching(/^\d{4}-/), last_used_at: null, revoked_at: null });
      // The admin key the suite uses, used a moment ago on this node: its last use is recent.
      const admin = (await listed()).find((k) => (k.scopes as string[]).includes('admin') && k.last_used_at !== null);
      expect(Date.now() - Date.parse(admin!.last_used_at as string)).toBeLessThan(60_000);
      await server.settle(created.body.key);
      expect((await call(server.url, 'GET', '/orgs/me', { key: created.body.key })).status).toBe(200);
      expect((await listed()).find((k) => k.id === created.body.id)!.last_used_at).toEqual(expect.stringMatching(/^\d{4}-/));
      // Only an admin key of the org: another scope 403, another org's or an unknown id 404.
      const reviewer = (await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['review'] } })).body.key as string;
      await server.settle(reviewer);
      expect((await call(server.url, 'DELETE', `/admin/keys/${created.body.id}`, { key: reviewer })).status).toBe(403);
      expect((await call(server.url, 'GET', '/admin/keys', { key: reviewer })).status).toBe(403);
      const other = await runCli(['keys', 'create', '--org', 'other-org', '--scopes', 'admin'], server.cliEnv);
      const otherId = JSON.parse(other.stdout.split('\n')[0]!).id as string;
      expect((await call(server.url, 'DELETE', `/admin/keys/${otherId}`)).status).toBe(404);
      expect((await call(server.url, 'DELETE', '/admin/keys/key_nope')).body.error.code).toBe('not_found');
      const revoked = await call(server.url, 'DELETE', `/admin/keys/${created.body.id}`);
      expect(revoked.status).toBe(200);
      expect(revoked.body).toMatchObject({ id: created.body.id, revoked_at: expect.stringMatching(/^\d{4}-/) });
      // Refused at once on the node that revoked it; on every other node once its KV watch has it.
      expect((await call(server.url, 'GET', '/orgs/me', { key: created.body.key })).status).toBe(401);
      await expect.poll(async () => (await call(server.readUrl, 'GET', '/orgs/me', { key: created.body.key })).status, { timeout: 5_000 }).toBe(401);
      expect((await listed()).find((k) => k.id === created.body.id)!.revoked_at).toBe(revoked.body.revoked_at);
      // Again: the same answer, nothing changed.
      expect((await call(server.url, 'DELETE', `/admin/keys/${created.body.id}`)).body.revoked_at).toBe(revoked.body.revoked_at);
    });

    it('the CLI lists an org\'s keys, a JSON line each, never a secret', async () => {
      const out = await runCli(['keys', 'list', '--org', ORG], server.cliEnv);
      expect(out).toMatchObject({ code: 0, stderr: '' });
      const lines = out.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.length).toBeGreaterThan(1);
      for (const key of lines) expect(Object.keys(key)).toEqual(['id', 'name', 'scopes', 'created_at', 'last_used_at', 'revoked_at']);
      expect(out.stdout).not.toContain('vgl_');
      expect(await runCli(['keys', 'list'], server.cliEnv)).toMatchObject({ code: 2, stderr: 'vigil keys: keys list needs --org (see vigil keys --help)\n' });
    });

    it('the CLI refuses unknown scopes and bad slugs', async () => {
      const scopes = await runCli(['keys', 'create', '--org', 'x', '--scopes', 'root'], server.cliEnv);
      expect(scopes.code).not.toBe(0);
      expect(scopes.stderr).toMatch(/scope/);
      const slug = await runCli(['keys', 'create', '--org', 'Bad Slug', '--scopes', 'admin'], server.cliEnv);
      expect(slug.code).not.toBe(0);
    });
  });

  describe('agents', () => {
    it('registers an agent with defaults and refuses a second registration with 409', async () => {
      const res = await call(server.url, 'POST', '/agents/', { body: { agent_id: 'bot.1:a-b_c', name: 'Bot One' } });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ agent_id: 'bot.1:a-b_c', name: 'Bot One', kind: 'production', observed: true, is_active: true });
      const again = await call(server.url, 'POST', '/agents/', { body: { agent_id: 'bot.1:a-b_c', name: 'Other' } });
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe('conflict');
    });

    it('validates agent_id, kind and unknown fields with details naming the path', async () => {
      const cases: [unknown, string][] = [
        [{ agent_id: 'has space', name: 'x' }, 'agent_id'],
        [{ agent_id: 'a'.repeat(129), name: 'x' }, 'agent_id'],
        [{ agent_id: '', name: 'x' }, 'agent_id'],
        [{ agent_id: 'ok', name: 'x', kind: 'robot' }, 'kind'],
        [{ agent_id: 'ok', name: 'x', extra: 1 }, 'extra'],
        [{ agent_id: 'ok' }, 'name'],
      ];
      for (const [body, path] of cases) {
        const res = await call(server.url, 'POST', '/agents/', { body });
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
      }
      const exported = await call(server.readUrl, 'GET', '/audit/export');
      expect(exported.text).not.toContain('"agent_id":"ok"');
    });

    it('accepts a key of any scope for registration (bearer route)', async () => {
      const reviewer = await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['review'] } });
      const res = await call(server.url, 'POST', '/agents', { key: reviewer.body.key, body: { agent_id: 'by-reviewer', name: 'R', kind: 'sandbox', observed: false } });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ kind: 'sandbox', observed: false });
    });

    it('records registration as an agent ledger record', async () => {
      const res = await call(server.readUrl, 'GET', '/audit/export?agent_id=bot.1:a-b_c');
      const first = JSON.parse(res.text.split('\n')[0]!);
      expect(first.kind).toBe('agent');
      expect(first.body).toEqual({ agent_id: 'bot.1:a-b_c', name: 'Bot One', kind: 'production', observed: true });
    });

    it('GET /agents lists the org\'s agents with their state, a page at a time', async () => {
      for (const id of ['list-a', 'list-b', 'list-c']) expect((await call(server.url, 'POST', '/agents/', { body: { agent_id: id, name: id } })).status).toBe(201);
      expect((await call(server.url, 'POST', '/events/', { body: { agent_id: 'list-b', event_type: 'output_generated', payload: {} } })).status).toBe(200);
      await server.settle(ADMIN_KEY);
      const all = await call(server.readUrl, 'GET', '/agents?limit=100');
      expect(all.status).toBe(200);
      expect(all.body).toMatchObject({ org: ORG, limit: 100, offset: 0 });
      expect(all.body.total).toBe(all.body.agents.length);
      const ids = all.body.agents.map((a: { agent_id: string }) => a.agent_id);
      expect(ids.slice(ids.indexOf('list-a'), ids.indexOf('list-a') + 3)).toEqual(['list-a', 'list-b', 'list-c']);
      const b = all.body.agents.find((a: { agent_id: string }) => a.agent_id === 'list-b');
      expect(b).toMatchObject({ agent_id: 'list-b', gate: 'pass', bii: expect.any(Number), public: false, is_active: true, last_event_at: expect.stringMatching(/^\d{4}-/) });
      expect(all.body.agents.find((a: { agent_id: string }) => a.agent_id === 'list-a')).toMatchObject({ gate: null, bii: null });
      const page = await call(server.readUrl, `GET`, `/agents/?limit=2&offset=${ids.indexOf('list-b')}`);
      expect(page.body.agents.map((a: { agent_id: string }) => a.agent_id)).toEqual(['list-b', 'list-c']);
      for (const query of ['limit=0', 'limit=101', 'offset=-1', 'limit=x']) {
        const bad = await call(server.readUrl, 'GET', `/agents?${query}`);
        expect(bad.status, query).toBe(400);
        expect(bad.body.error.details[0].path).toBe(query.split('=')[0]);
      }
    });

    it('keeps admin key material out of responses other than its creation', async () => {
      const res = await call(server.readUrl, 'GET', '/orgs/me');
      expect(res.text).not.toContain(ADMIN_KEY);
    });
  });
});
