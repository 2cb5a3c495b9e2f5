import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { call, removeDir, startServer, type TestServer } from '../support/server.js';

let server: TestServer;
let receiver: Receiver;
let webhookId: number;

beforeAll(async () => {
  receiver = await startReceiver();
  server = await startServer({ VIGIL_WEBHOOK_ALLOW_PRIVATE: '1', VIGIL_DEMO: '1' });
  webhookId = (await call(server.url, 'POST', '/webhooks', { body: { url: receiver.url(), events: ['gate.hold'] } })).body.id;
});
afterAll(async () => {
  await server.close();
  await receiver.close();
  removeDir(server.dataDir);
});

let n = 0;
const fresh = (): string => `s${++n}`;

/** Every keyed collection route, with a request body that succeeds (a fresh one each call). */
const COLLECTIONS: { method: string; path: () => string; body?: () => unknown; status: number }[] = [
  { method: 'POST', path: () => '/agents', body: () => ({ agent_id: `agent-${fresh()}`, name: 'A' }), status: 201 },
  { method: 'POST', path: () => '/events', body: () => ({ agent_id: 'slash', event_type: 'output_generated', payload: {} }), status: 200 },
  { method: 'GET', path: () => '/webhooks', status: 200 },
  { method: 'POST', path: () => '/webhooks', body: () => ({ url: receiver.url(`/${fresh()}`), events: ['gate.alert'] }), status: 200 },
  { method: 'GET', path: () => `/webhooks/${webhookId}/deliveries`, status: 200 },
  { method: 'GET', path: () => '/reviews', status: 200 },
  { method: 'GET', path: () => '/exports', status: 200 },
  { method: 'POST', path: () => '/admin/keys', body: () => ({ scopes: ['review'], name: fresh() }), status: 201 },
  { method: 'GET', path: () => '/studio/agents', status: 200 },
  { method: 'POST', path: () => '/studio/agents', body: () => ({ name: `Studio ${fresh()}`, domain: 'clinical' }), status: 201 },
];

describe('trailing slashes', () => {
  it('every keyed collection route answers alike with and without the trailing slash', async () => {
    expect((await call(server.url, 'POST', '/agents', { body: { agent_id: 'slash', name: 'Slash' } })).status).toBe(201);
    for (const route of COLLECTIONS) {
      const [bare, slashed] = [route.path(), `${route.path()}/`];
      const a = await call(server.url, route.method, bare, route.body === undefined ? {} : { body: route.body() });
      const b = await call(server.url, route.method, slashed, route.body === undefined ? {} : { body: route.body() });
      expect(a.status, `${route.method} ${bare}`).toBe(route.status);
      expect(b.status, `${route.method} ${slashed}`).toBe(route.status);
      if (route.method === 'GET') expect(b.body, slashed).toEqual(a.body);
      // The same auth on both spellings.
      const none = await call(server.url, route.method, slashed, route.body === undefined ? { key: null } : { key: null, body: {} });
      expect(none.status, `${slashed} without a key`).toBe(401);
    }
  });

  it('single resources and actions keep one spelling', async () => {
    for (const [method, path] of [
      ['GET', `/webhooks/${webhookId}/`],
      ['POST', '/exports/bundle/'],
      ['GET', '/billing/statement/'],
      ['GET', '/agents/slash/'],
    ] as const) {
      expect((await call(server.url, method, path, method === 'GET' ? {} : { body: {} })).status, `${method} ${path}`).toBe(404);
    }
  });
});
