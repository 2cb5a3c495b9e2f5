/**
 * Demo mode over HTTP: studio (spec 4.7) and chat (4.8) routes on the real service started with
 * VIGIL_DEMO=1. NEEDS THE DEMO WIRING in the composition root (src/runtime.ts, src/http/server.ts,
 * src/http/deps.ts, src/config.ts): until it is in, `beforeAll` fails with a message saying so.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, parseLines, removeDir, runCli, startServer, type TestServer } from '../support/server.js';

const STUDIO_FIELDS = [
  'id', 'agent_id', 'name', 'description', 'domain', 'risk_level', 'status', 'persona', 'allowed_actions',
  'forbidden_actions', 'deployed_at', 'deploy_endpoint', 'created_at', 'is_seed',
].sort();
const CHAT_FIELDS = [
  'response', 'gate_status', 'bii', 'composite_trust', 'reason', 'requires_human_review', 'event_id', 'agent_name',
  'agent_domain', 'agent_risk',
].sort();
const DOMAINS = ['clinical', 'insurance', 'wellness', 'pharmacy', 'benefits'];

async function startDemo(env: Record<string, string> = {}, dataDir?: string, logs?: { msg: string; fields?: Record<string, unknown> }[]): Promise<TestServer> {
  const server = await startServer({ VIGIL_DEMO: '1', ...env }, dataDir, logs);
  const probe = await call(server.url, 'GET', '/studio/agents');
  if (probe.status === 404) {
    await server.close();
    removeDir(server.dataDir);
    throw new Error('VIGIL_DEMO=1 did not mount the demo routes: the composition root does not wire demoRoutes/Studio yet (see README "Demo mode")');
  }
  return server;
}

let server: TestServer;
let otherOrgKey: string;
let writerKey: string;
beforeAll(async () => {
  server = await startDemo();
  const cli = await runCli(['keys', 'create', '--org', 'other-org', '--scopes', 'review'], { VIGIL_DATA_DIR: server.dataDir });
  otherOrgKey = cli.stdout.trim().split('\n').at(-1)!;
  writerKey = (await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'] } })).body.key;
});
afterAll(async () => {
  await server?.close();
  if (server !== undefined) removeDir(server.dataDir);
});

const create = (body: Record<string, unknown>, key?: string) => call(server.url, 'POST', '/studio/agents', { body, ...(key === undefined ? {} : { key }) });
const triage = { name: 'Triage Helper', domain: 'clinical', risk_level: 'high', allowed_actions: ['explain care plans'], forbidden_actions: ['diagnose conditions', 'prescribe medication'] };

async function deployedAgent(name = 'Triage Helper'): Promise<string> {
  const created = await create({ ...triage, name });
  expect(created.status).toBe(201);
  const deployed = await call(server.url, 'POST', `/studio/agents/${created.body.agent_id}/deploy`);
  expect(deployed.status).toBe(200);
  return created.body.agent_id;
}

describe('studio: auth', () => {
  it('answers 401 without a key and 403 for a key without the review scope', async () => {
    expect((await call(server.url, 'GET', '/studio/agents', { key: null })).status).toBe(401);
    const forbidden = await call(server.url, 'GET', '/studio/agents', { key: writerKey });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error.code).toBe('forbidden');
    expect((await call(server.url, 'POST', '/chat/studio-clinical', { key: writerKey, body: { message: 'hi' } })).status).toBe(403);
  });
});

describe('studio: agents', () => {
  it('lists the five seed agents first, deployed, with exactly the spec 2.9 fields', async () => {
    const res = await call(server.url, 'GET', '/studio/agents');
    expect(res.status).toBe(200);
    const seeds = (res.body as any[]).filter((a) => a.is_seed);
    expect(seeds.map((a) => a.agent_id)).toEqual(DOMAINS.map((d) => `studio-${d}`));
    expect(seeds.map((a) => a.id)).toEqual([1, 2, 3, 4, 5]);
    for (const a of seeds) {
      expect(Object.keys(a).sort()).toEqual(STUDIO_FIELDS);
      expect(a.status).toBe('deployed');
      // The server listens on port 0: the endpoint must name the port actually bound.
      expect(a.deploy_endpoint).toBe(`${server.url}/chat/${a.agent_id}`);
      expect(a.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
  });

  it('creates a draft (201) with defaults, registered as a sandbox ledger agent', async () => {
    const res = await create({ name: 'Plan Explainer', domain: 'benefits' });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(STUDIO_FIELDS);
    expect(res.body).toMatchObject({
      name: 'Plan Explainer',
      description: null,
      domain: 'benefits',
      risk_level: 'medium',
      status: 'draft',
      persona: null,
      allowed_actions: [],
      forbidden_actions: [],
      deployed_at: null,
      deploy_endpoint: null,
      is_seed: false,
    });
    expect(res.body.agent_id).toMatch(/^plan-explainer-[0-9a-f]{6}$/);
    expect(res.body.id).toBeGreaterThan(5);
    const ledger = await call(server.url, 'GET', `/agents/${res.body.agent_id}`);
    expect(ledger.status).toBe(200);
    expect(ledger.body).toMatchObject({ kind: 'sandbox', name: 'Plan Explainer', is_active: true });
    const got = await call(server.url, 'GET', `/studio/agents/${res.body.agent_id}`);
    expect(got.body).toEqual(res.body);
  });

  it('refuses invalid bodies with 400 naming each field, and writes nothing', async () => {
    const before = (await call(server.url, 'GET', '/studio/agents')).body.length;
    const cases: [Record<string, unknown>, string][] = [
      [{ domain: 'clinical' }, 'name'],
      [{ name: 'x', domain: 'dental' }, 'domain'],
      [{ name: 'x', domain: 'clinical', risk_level: 'extreme' }, 'risk_level'],
      [{ name: 'x', domain: 'clinical', allowed_actions: [''] }, 'allowed_actions.0'],
      [{ name: 'x', domain: 'clinical', colour: 'red' }, 'colour'],
      [{ name: '   ', domain: 'clinical' }, 'name'],
    ];
    for (const [body, path] of cases) {
      const res = await create(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    expect((await call(server.url, 'GET', '/studio/agents')).body.length).toBe(before);
  });

  it('answers 404 for an unknown agent and for another org’s agent; the other org has its own seeds', async () => {
    expect((await call(server.url, 'GET', '/studio/agents/nope')).status).toBe(404);
    expect((await call(server.url, 'GET', '/studio/agents/bad%20id')).status).toBe(404);
    const mine = await create({ name: 'Mine', domain: 'wellness' });
    const theirs = await call(server.url, 'GET', `/studio/agents/${mine.body.agent_id}`, { key: otherOrgKey });
    expect(theirs.status).toBe(404);
    const list = await call(server.url, 'GET', '/studio/agents', { key: otherOrgKey });
    expect(list.status).toBe(200);
    expect(list.body.map((a: any) => a.agent_id)).toEqual(DOMAINS.map((d) => `studio-${d}`));
    expect((await call(server.url, 'POST', `/studio/agents/${mine.body.agent_id}/deploy`, { key: otherOrgKey })).status).toBe(404);
  });
});

describe('service URLs on port 0', () => {
  it('name the port actually bound when VIGIL_BASE_URL and VIGIL_APP_URL are unset', async () => {
    expect(server.url).not.toMatch(/:0$/);
    const plan = await call(server.url, 'GET', '/billing/plan');
    expect(plan.status).toBe(200);
    expect(plan.body.upgrade).toBe(`${server.url}/pricing`);
  });
});

describe('studio: lifecycle', () => {
  it('deploys: status deployed, deployed_at and deploy_endpoint set', async () => {
    const created = await create(triage);
    const res = await call(server.url, 'POST', `/studio/agents/${created.body.agent_id}/deploy`);
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('deployed');
    expect(Date.parse(res.body.deployed_at)).toBeGreaterThan(0);
    expect(res.body.deploy_endpoint).toBe(`${server.url}/chat/${created.body.agent_id}`);
    const again = await call(server.url, 'POST', `/studio/agents/${created.body.agent_id}/deploy`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(res.body);
  });

  it('PATCH status: 400 without or with an unknown status, 409 for an illegal move, the agent otherwise', async () => {
    const id = (await create(triage)).body.agent_id;
    const path = `/studio/agents/${id}/status`;
    const missing = await call(server.url, 'PATCH', path);
    expect(missing.status).toBe(400);
    expect(missing.body.error.details[0].path).toBe('status');
    expect((await call(server.url, 'PATCH', `${path}?status=flying`)).status).toBe(400);
    const illegal = await call(server.url, 'PATCH', `${path}?status=paused`);
    expect(illegal.status).toBe(409);
    expect(illegal.body.error.code).toBe('conflict');

    const deployed = await call(server.url, 'PATCH', `${path}?status=deployed`);
    expect(deployed.status).toBe(200);
    expect(deployed.body).toMatchObject({ agent_id: id, status: 'deployed' });
    expect(deployed.body.deploy_endpoint).toBe(`${server.url}/chat/${id}`);
    const paused = await call(server.url, 'PATCH', `${path}?status=paused`);
    expect(paused.body.status).toBe('paused');
    expect((await call(server.url, 'PATCH', `${path}?status=draft`)).status).toBe(409);
    expect((await call(server.url, 'PATCH', `${path}?status=deployed`)).body.status).toBe('deployed');

    const retired = await call(server.url, 'PATCH', `${path}?status=retired`);
    expect(retired.status).toBe(200);
    expect(Object.keys(retired.body).sort()).toEqual(STUDIO_FIELDS);
    expect(retired.body.status).toBe('retired');
    expect((await call(server.url, 'GET', `/agents/${id}`)).body.is_active).toBe(false);
    expect((await call(server.url, 'PATCH', `${path}?status=deployed`)).status).toBe(409);
    expect((await call(server.url, 'POST', `/studio/agents/${id}/deploy`)).status).toBe(409);
    expect((await call(server.url, 'GET', `/studio/agents/${id}`)).body.status).toBe('retired');
  });

  it('PATCH status of an unknown agent is 404', async () => {
    expect((await call(server.url, 'PATCH', '/studio/agents/nope/status?status=paused')).status).toBe(404);
  });
});

describe('studio: suggest', () => {
  it('answers the four fields from the built-in generator, deterministically', async () => {
    const body = { name: 'Refill Bot', domain: 'pharmacy', risk_level: 'restricted', context: 'a chain of 40 stores' };
    const res = await call(server.url, 'POST', '/studio/agents/suggest', { body });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['allowed_actions', 'description', 'forbidden_actions', 'persona']);
    expect(res.body.description).toContain('Refill Bot');
    expect(res.body.description).toContain('a chain of 40 stores');
    expect(res.body.forbidden_actions).toContain('prescribe medication');
    expect(res.headers.get('x-vigil-provider')).toBe('builtin');
    expect(res.headers.get('x-vigil-provider-fallback')).toBeNull();
    const again = await call(server.url, 'POST', '/studio/agents/suggest', { body });
    expect(again.body).toEqual(res.body);
  });

  it('refuses a missing name or an unknown domain with 400', async () => {
    expect((await call(server.url, 'POST', '/studio/agents/suggest', { body: { domain: 'pharmacy' } })).status).toBe(400);
    expect((await call(server.url, 'POST', '/studio/agents/suggest', { body: { name: 'x', domain: 'dental' } })).status).toBe(400);
  });
});

describe('chat', () => {
  it('answers the 2.10 fields and records the reply as an output_generated event of that agent', async () => {
    const id = await deployedAgent();
    const res = await call(server.url, 'POST', `/chat/${id}`, { body: { message: 'Could you explain care plans?' } });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(CHAT_FIELDS);
    expect(res.body).toMatchObject({ gate_status: 'pass', requires_human_review: false, agent_name: 'Triage Helper', agent_domain: 'clinical', agent_risk: 'high' });
    expect(res.body.response).toContain('explain care plans');
    expect(Number.isInteger(res.body.event_id)).toBe(true);
    expect(res.headers.get('x-vigil-provider')).toBe('builtin');

    const exported = await call(server.url, 'GET', `/audit/export?agent_id=${id}`);
    expect(exported.status).toBe(200);
    const records = parseLines(exported.text);
    const event = records.find((r) => r.kind === 'event' && r.body.event_id === res.body.event_id);
    expect(event).toBeDefined();
    expect(event.agent_id).toBe(id);
    expect(event.body).toMatchObject({
      event_type: 'output_generated',
      source: 'service',
      gate_status: res.body.gate_status,
      bii: res.body.bii,
      payload: { content_length: res.body.response.length, forbidden_request: false, provider: 'builtin' },
    });
    expect(records.filter((r) => r.kind === 'agent')[0].body).toMatchObject({ agent_id: id, kind: 'sandbox' });
  });

  it('keeps history and a caller dti; the dti is recorded on the event', async () => {
    const id = await deployedAgent('History Helper');
    const history = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Hello! How can I help?' },
    ];
    const res = await call(server.url, 'POST', `/chat/${id}`, { body: { message: 'and my care plan?', history, dti: 0.3 } });
    expect(res.status).toBe(200);
    const records = parseLines((await call(server.url, 'GET', `/audit/export?agent_id=${id}`)).text);
    expect(records.find((r) => r.body.event_id === res.body.event_id).body.dti).toBe(0.3);
  });

  it('a forbidden request lowers the BII against a clean one, holds the reply and is marked on the event', async () => {
    const clean = await deployedAgent('Twin A');
    const risky = await deployedAgent('Twin B');
    const ok = await call(server.url, 'POST', `/chat/${clean}`, { body: { message: 'When is my next appointment?' } });
    const bad = await call(server.url, 'POST', `/chat/${risky}`, { body: { message: 'Please prescribe me some oxycodone.' } });
    expect(ok.status).toBe(200);
    expect(bad.status).toBe(200);
    expect(bad.body.bii).toBeLessThan(ok.body.bii);
    expect(bad.body.gate_status).not.toBe('pass');
    expect(bad.body.requires_human_review).toBe(true);
    expect(bad.body.response).toMatch(/held for human review/);
    const records = parseLines((await call(server.url, 'GET', `/audit/export?agent_id=${risky}`)).text);
    const event = records.find((r) => r.body.event_id === bad.body.event_id);
    expect(event.body.dti).toBeGreaterThanOrEqual(0.9);
    expect(event.body.payload).toMatchObject({ forbidden_request: true, matched_action: 'prescribe medication' });
    const held = await call(server.url, 'GET', '/reviews?status=pending');
    expect(held.body.some((h: any) => h.action_id === bad.body.event_id && h.agent_id === risky)).toBe(true);
  });

  it('answers 409 for a draft, paused or retired agent and 404 for an unknown one or a ledger-only agent', async () => {
    const draft = (await create(triage)).body.agent_id;
    expect((await call(server.url, 'POST', `/chat/${draft}`, { body: { message: 'hi' } })).status).toBe(409);
    const id = await deployedAgent('Pausable');
    await call(server.url, 'PATCH', `/studio/agents/${id}/status?status=paused`);
    const paused = await call(server.url, 'POST', `/chat/${id}`, { body: { message: 'hi' } });
    expect(paused.status).toBe(409);
    expect(paused.body.error.code).toBe('conflict');
    await call(server.url, 'PATCH', `/studio/agents/${id}/status?status=retired`);
    expect((await call(server.url, 'POST', `/chat/${id}`, { body: { message: 'hi' } })).status).toBe(409);
    expect((await call(server.url, 'POST', '/chat/nope', { body: { message: 'hi' } })).status).toBe(404);
    await call(server.url, 'POST', '/agents/', { body: { agent_id: 'plain-agent', name: 'Plain' } });
    expect((await call(server.url, 'POST', '/chat/plain-agent', { body: { message: 'hi' } })).status).toBe(404);
    expect((await call(server.url, 'GET', '/chat/plain-agent/info')).status).toBe(404);
  });

  it('refuses invalid chat bodies with 400 and records nothing', async () => {
    const id = await deployedAgent('Strict Body');
    const before = parseLines((await call(server.url, 'GET', `/audit/export?agent_id=${id}`)).text).length;
    const turns = Array.from({ length: 51 }, () => ({ role: 'user', content: 'x' }));
    const cases: [unknown, string][] = [
      [{}, 'message'],
      [{ message: '' }, 'message'],
      [{ message: 'x'.repeat(4001) }, 'message'],
      [{ message: 'hi', history: turns }, 'history'],
      [{ message: 'hi', history: [{ role: 'system', content: 'x' }] }, 'history.0.role'],
      [{ message: 'hi', dti: 1.5 }, 'dti'],
      [{ message: 'hi', extra: true }, 'extra'],
    ];
    for (const [body, path] of cases) {
      const res = await call(server.url, 'POST', `/chat/${id}`, { body });
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain(path);
    }
    expect((await call(server.url, 'POST', `/chat/${id}`, { body: { message: 'x'.repeat(4000) } })).status).toBe(200);
    expect(parseLines((await call(server.url, 'GET', `/audit/export?agent_id=${id}`)).text).length).toBe(before + 1);
  });

  it('GET /chat/{id}/info gives what a chat UI needs, with the current gate and BII', async () => {
    const id = await deployedAgent('Info Helper');
    const before = await call(server.url, 'GET', `/chat/${id}/info`);
    expect(before.status).toBe(200);
    expect(before.body).toMatchObject({
      agent_id: id,
      name: 'Info Helper',
      domain: 'clinical',
      risk_level: 'high',
      status: 'deployed',
      gate: null,
      bii: null,
      provider: 'builtin',
      model: null,
    });
    expect(before.body.deploy_endpoint).toBe(`${server.url}/chat/${id}`);
    expect('persona' in before.body).toBe(true);
    const chat = await call(server.url, 'POST', `/chat/${id}`, { body: { message: 'hello' } });
    const after = await call(server.url, 'GET', `/chat/${id}/info`);
    expect(after.body).toMatchObject({ gate: chat.body.gate_status, bii: chat.body.bii });
    const draft = (await create(triage)).body.agent_id;
    expect((await call(server.url, 'GET', `/chat/${draft}/info`)).body.status).toBe('draft');
  });
});

describe('seeds survive a restart; the configured language model answers, or the built-in one stands in', () => {
  let llm: Server;
  let mode: 'ok' | 'fail' = 'ok';
  const KEY = 'sk-e2e-secret';
  beforeAll(async () => {
    llm = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (mode === 'fail' || req.headers.authorization !== `Bearer ${KEY}`) {
          res.writeHead(500);
          res.end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'Hello from the stub model.' } }] }));
      });
    });
    await new Promise<void>((resolve) => llm.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    llm.closeAllConnections();
    await new Promise((resolve) => llm.close(resolve));
  });

  it('keeps the seeds and ids across a restart and chats through the stub provider, falling back on a 500', async () => {
    const logs: { msg: string; fields?: Record<string, unknown> }[] = [];
    const env = {
      VIGIL_LLM_URL: `http://127.0.0.1:${(llm.address() as AddressInfo).port}/v1`,
      VIGIL_LLM_MODEL: 'stub-1',
      VIGIL_LLM_KEY: KEY,
      VIGIL_LLM_TIMEOUT_MS: '2000',
    };
    const first = await startDemo(env, undefined, logs);
    const seeds = (await call(first.url, 'GET', '/studio/agents')).body;
    await first.close();
    const second = await startDemo(env, first.dataDir, logs);
    try {
      // Same seeds and ids; the endpoints follow the new server's port.
      const rebased = seeds.map((a: { agent_id: string }) => ({ ...a, deploy_endpoint: `${second.url}/chat/${a.agent_id}` }));
      expect((await call(second.url, 'GET', '/studio/agents')).body).toEqual(rebased);
      const info = await call(second.url, 'GET', '/chat/studio-wellness/info');
      expect(info.body).toMatchObject({ provider: 'openai-compatible', model: 'stub-1' });

      mode = 'ok';
      const viaModel = await call(second.url, 'POST', '/chat/studio-wellness', { body: { message: 'Any tips for sleeping better?' } });
      expect(viaModel.status).toBe(200);
      expect(viaModel.body.response).toBe('Hello from the stub model.');
      expect(viaModel.headers.get('x-vigil-provider')).toBe('openai-compatible');

      mode = 'fail';
      const viaFallback = await call(second.url, 'POST', '/chat/studio-wellness', { body: { message: 'Any tips for sleeping better?' } });
      expect(viaFallback.status).toBe(200);
      expect(viaFallback.headers.get('x-vigil-provider')).toBe('builtin');
      expect(viaFallback.headers.get('x-vigil-provider-fallback')).toBe('openai-compatible');
      expect(viaFallback.body.response).not.toBe('Hello from the stub model.');
      expect(logs.some((l) => l.fields?.provider === 'openai-compatible' && l.fields?.code === 'http_status')).toBe(true);
      expect(JSON.stringify(logs)).not.toContain(KEY);
    } finally {
      await second.close();
      removeDir(second.dataDir);
    }
  });
});
