import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, removeDir, startServer, type TestServer } from '../support/server.js';

/** Without VIGIL_DEMO=1 the demo routes do not exist: 404, with or without a key, for any method. */
let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
  removeDir(server.dataDir);
});

const PATHS: [string, string, unknown?][] = [
  ['GET', '/studio/agents'],
  ['POST', '/studio/agents', { name: 'x', domain: 'clinical' }],
  ['POST', '/studio/agents/suggest', { name: 'x', domain: 'clinical' }],
  ['GET', '/studio/agents/studio-clinical'],
  ['POST', '/studio/agents/studio-clinical/deploy'],
  ['PATCH', '/studio/agents/studio-clinical/status?status=paused'],
  ['POST', '/chat/studio-clinical', { message: 'hello' }],
  ['GET', '/chat/studio-clinical/info'],
];

describe('demo mode off', () => {
  it('answers 404 not_found on every studio and chat path, keyed or not', async () => {
    for (const [method, path, body] of PATHS) {
      for (const key of [undefined, null]) {
        const res = await call(server.url, method, path, { key, ...(body === undefined ? {} : { body }) });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body.error.code).toBe('not_found');
      }
    }
  });

  it('seeds nothing: no studio agent is registered in the ledger', async () => {
    const res = await call(server.url, 'GET', '/agents/studio-clinical');
    expect(res.status).toBe(404);
  });
});
