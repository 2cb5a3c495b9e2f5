import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { startReceiver } from '../support/receiver.js';
import { ADMIN_KEY, call, removeDir, spawnServer, startServer, tempDir } from '../support/server.js';

/** Everything this process writes to the console or its stdout/stderr while a test runs. */
let written: string[] = [];
beforeEach(() => {
  written = [];
  for (const method of ['log', 'info', 'warn', 'error', 'debug'] as const) {
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void written.push(args.map(String).join(' ')));
  }
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream);
    vi.spyOn(stream, 'write').mockImplementation(((chunk: unknown, ...rest: unknown[]) => {
      written.push(String(chunk));
      return (write as (...a: unknown[]) => boolean)(chunk, ...rest);
    }));
  }
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** The secret itself and, for a whsec_ secret, its key material alone (what an HMAC is keyed with). */
function forms(secret: string): string[] {
  return secret.startsWith('whsec_') ? [secret, secret.slice('whsec_'.length)] : [secret];
}

function expectNoSecrets(lines: readonly string[], secrets: readonly string[]): void {
  expect(lines.length).toBeGreaterThan(0);
  for (const secret of secrets) {
    expect(secret.length).toBeGreaterThan(8);
    for (const form of forms(secret)) {
      const leaked = lines.filter((line) => line.includes(form));
      expect(leaked, `a log line carries the secret ${form.slice(0, 8)}…`).toEqual([]);
    }
  }
}

/** An OpenAI-compatible endpoint refusing the key, echoing it as real providers do (partly). */
async function refusingModel(): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `Incorrect API key provided: ${req.headers.authorization ?? ''}` } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

describe('secrets never reach the logs', () => {
  it('keys, webhook secrets (rotated ones too), sandbox keys, the metrics token and the LLM key stay out of everything an in-process server logs', async () => {
    const LLM_KEY = 'sk-llm-secret-0123456789abcdef';
    const METRICS_TOKEN = 'metrics-token-secret-0123456789';
    const WRONG_KEY = 'vgl_not-a-key-but-a-secret-all-the-same-0123456';
    const model = await refusingModel();
    const receiver = await startReceiver(() => 500);
    const logs: { msg: string; fields?: Record<string, unknown> }[] = [];
    const server = await startServer(
      {
        VIGIL_WEBHOOK_ALLOW_PRIVATE: '1',
        VIGIL_WEBHOOK_RETRY_SCHEDULE: '0.05,0.05',
        VIGIL_DEMO: '1',
        VIGIL_LLM_URL: `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1`,
        VIGIL_LLM_MODEL: 'stub',
        VIGIL_LLM_KEY: LLM_KEY,
        VIGIL_LLM_TIMEOUT_MS: '2000',
        VIGIL_METRICS_TOKEN: METRICS_TOKEN,
      },
      tempDir(),
      logs,
    );
    const secrets = [ADMIN_KEY, LLM_KEY, WRONG_KEY, METRICS_TOKEN];
    try {
      const made = await call(server.url, 'POST', '/admin/keys', { body: { scopes: ['events:write'], name: 'writer' } });
      expect(made.status).toBe(201);
      secrets.push(made.body.key);
      const hook = await call(server.url, 'POST', '/webhooks', { body: { url: receiver.url(), events: ['gate.hold', 'gate.collapse', 'gate.alert'] } });
      expect(hook.status).toBe(200);
      expect(hook.body.secret).toMatch(/^whsec_/);
      secrets.push(hook.body.secret);
      // Rotated: both secrets sign every attempt from now on.
      const rotated = await call(server.url, 'POST', `/webhooks/${hook.body.id}/rotate-secret`);
      expect(rotated.status).toBe(200);
      secrets.push(rotated.body.secret);
      const sandbox = await call(server.url, 'POST', '/api/v1/keys', { key: null, body: { email: 'dev@example.com' } });
      expect(sandbox.status).toBe(201);
      secrets.push(sandbox.body.key);

      // Use them, and fail with them: signed deliveries that fail, refusals, a model that refuses its key.
      expect((await call(server.url, 'POST', `/webhooks/${hook.body.id}/test`)).status).toBe(200);
      await call(server.url, 'POST', '/agents', { key: made.body.key, body: { agent_id: 'leaky', name: 'Leaky' } });
      for (let i = 0; i < 4; i++) {
        await call(server.url, 'POST', '/events', { key: made.body.key, body: { agent_id: 'leaky', event_type: 'config_read', payload: { key: 'api_token' }, dti: 0.2 } });
      }
      expect((await call(server.url, 'GET', '/orgs/me', { key: WRONG_KEY })).status).toBe(401);
      expect((await call(server.url, 'GET', '/metrics', { key: METRICS_TOKEN })).status).toBe(200);
      expect((await call(server.url, 'GET', '/metrics', { key: `${METRICS_TOKEN}x` })).status).toBe(401);
      expect((await call(server.url, 'POST', '/admin/keys', { key: made.body.key, body: { scopes: ['admin'] } })).status).toBe(403);
      expect((await call(server.url, 'POST', '/admin/keys', { raw: '{"scopes": [' })).status).toBe(400);
      expect((await call(server.url, 'POST', '/api/v1/score', { key: sandbox.body.key, body: { record_id: 1 } })).status).toBe(400);
      expect((await call(server.url, 'POST', '/api/v1/score', { key: `${sandbox.body.key}x`, body: {} })).status).toBe(401);
      const suggested = await call(server.url, 'POST', '/studio/agents/suggest', { body: { name: 'Helper', domain: 'wellness' } });
      expect(suggested.status).toBe(200);
      expect(logs.some((l) => l.msg.startsWith('language model failed'))).toBe(true);
      const deadline = Date.now() + 10_000;
      while (receiver.received.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(receiver.received.length).toBeGreaterThanOrEqual(3);
    } finally {
      await server.close();
      await receiver.close();
      await new Promise((resolve) => model.close(resolve));
      removeDir(server.dataDir);
    }
    expect(logs.some((l) => l.msg === 'listening')).toBe(true);
    expectNoSecrets([...logs.map((l) => JSON.stringify(l)), ...written], secrets);
  });

  it('the first-start admin key goes to the terminal banner only, never into a JSON log line', async () => {
    const dir = tempDir();
    const receiver = await startReceiver();
    try {
      const proc = await spawnServer(dir, { VIGIL_BOOTSTRAP_ORG: '', VIGIL_BOOTSTRAP_KEY: '', VIGIL_WEBHOOK_ALLOW_PRIVATE: '1' });
      const banner = proc
        .output()
        .split('\n')
        .filter((line) => !line.startsWith('{'));
      const first = banner.map((line) => /vgl_[A-Za-z0-9_-]{43}/.exec(line)?.[0]).find((k) => k !== undefined);
      expect(first, proc.output()).toBeDefined();
      expect(banner.join('\n')).toContain('shown only now');
      const secrets = [first!];
      const made = await call(proc.url, 'POST', '/admin/keys', { key: first!, body: { scopes: ['review'] } });
      expect(made.status).toBe(201);
      secrets.push(made.body.key);
      const hook = await call(proc.url, 'POST', '/webhooks', { key: first!, body: { url: receiver.url(), events: ['gate.hold'] } });
      expect(hook.status).toBe(200);
      secrets.push(hook.body.secret);
      expect((await call(proc.url, 'POST', '/admin/keys', { key: made.body.key, body: { scopes: ['admin'] } })).status).toBe(403);
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toBe(0);

      const lines = proc.output().split('\n');
      const json = lines.filter((line) => line.startsWith('{'));
      expect(json.some((line) => line.includes('"msg":"listening"'))).toBe(true);
      expectNoSecrets(json, secrets);
      // The key is printed once, as plain text.
      expect(lines.filter((line) => line.includes(first!))).toEqual([`    ${first!}`]);
    } finally {
      await receiver.close();
      removeDir(dir);
    }
  });

  it('refuses an LLM address carrying credentials (fetch would echo them into error logs), naming no secret', () => {
    let thrown: unknown;
    try {
      loadConfig({ VIGIL_DEMO: '1', VIGIL_LLM_URL: 'https://user:pa55word@llm.example/v1', VIGIL_LLM_MODEL: 'm', VIGIL_LLM_KEY: 'sk-abc' });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as Error).message).toContain('VIGIL_LLM_URL: must not contain credentials');
    expect((thrown as Error).message).not.toContain('pa55word');
    expect((thrown as Error).message).not.toContain('sk-abc');
  });
});
