import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTool, runLoad } from '../../bench/load.js';

/**
 * The bench's header rotation (the many-tenants scenario), through the real load generator
 * against a real HTTP server that counts the keys it is sent: every set is used, in turn, and the
 * fixed headers and body go with each request.
 */
describe(`bench load generator rotates header sets (${loadTool()})`, () => {
  let server: Server;
  let url = '';
  const seen = new Map<string, number>();
  let bad = 0;
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        const key = req.headers.authorization ?? '';
        seen.set(key, (seen.get(key) ?? 0) + 1);
        if (req.method !== 'POST' || req.headers['content-type'] !== 'application/json' || body !== '{"n":1}') bad++;
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/events/`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('uses every one of 250 header sets, round robin, with the fixed headers and body', async () => {
    const keys = Array.from({ length: 250 }, (_, i) => `Bearer key-${i}`);
    const result = await runLoad({ url, method: 'POST', headers: { 'content-type': 'application/json' }, rotate: keys.map((authorization) => ({ authorization })), body: '{"n":1}', connections: 4, durationSec: 1 });
    expect(result.errors).toBe(0);
    expect(result.requests).toBeGreaterThan(500);
    expect(bad).toBe(0);
    expect([...seen.keys()].sort()).toEqual([...keys].sort());
    // Round robin: no key is sent much more often than another.
    const counts = [...seen.values()];
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(Math.ceil(Math.max(...counts) / 2) + 4);
  });
});
