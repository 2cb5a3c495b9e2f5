import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, call, ORG, removeDir, runCli, startServer, type TestServer } from '../support/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
  removeDir(server.dataDir);
});

describe('health and org', () => {
  it('GET /health answers status, version and mode without a key', async () => {
    const res = await call(server.url, 'GET', '/health', { key: null });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', version: '0.2.0', mode: 'embedded' });
  });

  it('GET /orgs/me names the key org', async () => {
    const res = await call(server.url, 'GET', '/orgs/me');
    expect(res.status).toBe(200);
    expect(res.body.slug).toBe(ORG);
    expect(res.body.key.scopes).toEqual(['events:write', 'review', 'admin']);
  });

  it('answers 401 with the JSON error body for a missing, malformed or unknown key', async () => {
    for (const headers of [{}, { authorization: 'Basic abc' }, { authorization: 'Bearer vgl_nope' }] as Record<string, string>[]) {
      const res = await call(server.url, 'GET', '/orgs/me', { key: null, headers });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
      expect(typeof res.body.error.message).toBe('string');
    }
  });

  it('answers 404 JSON for an unknown route', async () => {
    const res = await call(server.url, 'GET', '/nothing/here');
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

  it('the CLI creates a key against the data dir of a running server, which accepts it at once', async () => {
    const out = await runCli(['keys', 'create', '--org', 'cli-org', '--scopes', 'events:write,review', '--name', 'ops'], {
      VIGIL_DATA_DIR: server.dataDir,
    });
    expect(out.code).toBe(0);
    const key = out.stdout.trim().split('\n').at(-1)!;
    expect(key).toMatch(/^vgl_/);
    const me = await call(server.url, 'GET', '/orgs/me', { key });
    expect(me.status).toBe(200);
    expect(me.body.slug).toBe('cli-org');
    expect(me.body.key.scopes).toEqual(['events:write', 'review']);
  });

  it('the CLI refuses unknown scopes and bad slugs', async () => {
    const scopes = await runCli(['keys', 'create', '--org', 'x', '--scopes', 'root'], { VIGIL_DATA_DIR: server.dataDir });
    expect(scopes.code).not.toBe(0);
    expect(scopes.stderr).toMatch(/scope/);
    const slug = await runCli(['keys', 'create', '--org', 'Bad Slug', '--scopes', 'admin'], { VIGIL_DATA_DIR: server.dataDir });
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
    const exported = await call(server.url, 'GET', '/audit/export');
    expect(exported.text).not.toContain('"agent_id":"ok"');
  });

  it('accepts a key of any scope for registration (bearer route)', async () => {
    const reviewer = await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['review'] } });
    const res = await call(server.url, 'POST', '/agents', { key: reviewer.body.key, body: { agent_id: 'by-reviewer', name: 'R', kind: 'sandbox', observed: false } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ kind: 'sandbox', observed: false });
  });

  it('records registration as an agent ledger record', async () => {
    const res = await call(server.url, 'GET', '/audit/export?agent_id=bot.1:a-b_c');
    const first = JSON.parse(res.text.split('\n')[0]!);
    expect(first.kind).toBe('agent');
    expect(first.body).toEqual({ agent_id: 'bot.1:a-b_c', name: 'Bot One', kind: 'production', observed: true });
  });

  it('keeps admin key material out of responses other than its creation', async () => {
    const res = await call(server.url, 'GET', '/orgs/me');
    expect(res.text).not.toContain(ADMIN_KEY);
  });
});
