import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { getDefaultAutoSelectFamily, setDefaultAutoSelectFamily, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { checkReceiverUrl, type Lookup } from '../../src/net/receiver-address.js';
import { postWebhook, type PostOptions } from '../../src/net/webhook-sender.js';

interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A real loopback receiver: records every request and every TCP connection it accepts. */
let server: Server;
let port: number;
let received: Received[] = [];
let connections = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
      route(req.url ?? '', res);
    });
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections(); // the /hang request is still open
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  received = [];
  connections = 0;
});

function route(url: string, res: ServerResponse): void {
  const path = url.split('?')[0];
  if (path === '/ok' || path === '/other') res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks');
  else if (path === '/fail') res.writeHead(500).end('boom');
  else if (path === '/busy') res.writeHead(503, { 'retry-after': '120' }).end('later');
  else if (path === '/redirect') res.writeHead(302, { location: '/other' }).end();
  else if (path === '/big') res.writeHead(200).end('x'.repeat(256 * 1024));
  else if (path === '/hang') return; // never answers
  else res.writeHead(404).end();
}

const at = (path: string) => `http://127.0.0.1:${port}${path}`;
const post = (overrides: Partial<PostOptions>) =>
  postWebhook({ url: at('/ok'), body: '{}', headers: {}, timeoutMs: 5_000, allowPrivate: true, ...overrides });

/** A fake resolver answering 127.0.0.1 for every hostname, as a rebinding attacker's DNS would. */
const toLoopback: Lookup = async () => [{ address: '127.0.0.1', family: 4 }];

describe('postWebhook against a real receiver', () => {
  it('delivers on 200 with the exact headers and raw body', async () => {
    const body = '{"type":"event.ingest","note":"café ☕"}';
    const headers = { 'Content-Type': 'application/json', 'X-Vigil-Signature': 't=1700000000,v1=abc123', 'X-Vigil-Event': 'event.ingest' };
    const result = await post({ url: at('/ok?attempt=1'), body, headers });

    expect(result).toEqual({ status: 200, error: null, retryAfter: null });
    expect(received).toHaveLength(1);
    const [req] = received;
    expect(req?.method).toBe('POST');
    expect(req?.url).toBe('/ok?attempt=1');
    expect(req?.headers).toMatchObject({
      'content-type': 'application/json',
      'x-vigil-signature': 't=1700000000,v1=abc123',
      'x-vigil-event': 'event.ingest',
      'content-length': String(Buffer.byteLength(body)),
      host: `127.0.0.1:${port}`,
    });
    expect(req?.body.equals(Buffer.from(body, 'utf8'))).toBe(true);
  });

  it('overrides a caller Content-Length with the real byte length', async () => {
    const body = 'é';
    await post({ body, headers: { 'content-length': '999' } });
    expect(received[0]?.headers['content-length']).toBe('2');
  });

  it('returns a 500 as its status', async () => {
    expect(await post({ url: at('/fail') })).toEqual({ status: 500, error: null, retryAfter: null });
  });

  it('reports the answer\'s Retry-After as sent', async () => {
    expect(await post({ url: at('/busy') })).toEqual({ status: 503, error: null, retryAfter: '120' });
  });

  it('does not follow a redirect', async () => {
    expect(await post({ url: at('/redirect') })).toEqual({ status: 302, error: null, retryAfter: null });
    expect(received.map((r) => r.url)).toEqual(['/redirect']);
  });

  it('stops reading a large body and still reports the status', async () => {
    expect(await post({ url: at('/big') })).toEqual({ status: 200, error: null, retryAfter: null });
  });

  it('times out a receiver that never answers', async () => {
    const started = Date.now();
    const result = await post({ url: at('/hang'), timeoutMs: 300 });
    expect(result).toEqual({ status: null, error: 'timed out after 300 ms', retryAfter: null });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(received.map((r) => r.url)).toEqual(['/hang']);
  });

  it('reports a refused connection', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));

    const result = await post({ url: `http://127.0.0.1:${closedPort}/` });
    expect(result.status).toBeNull();
    expect(result.error).toMatch(/ECONNREFUSED/);
  });

  it('reports an invalid url and an unsupported scheme without throwing', async () => {
    expect(await post({ url: 'not a url' })).toEqual({ status: null, error: 'invalid url' });
    expect(await post({ url: 'ftp://127.0.0.1/' })).toEqual({ status: null, error: 'unsupported scheme ftp:' });
  });
});

describe('postWebhook SSRF protection', () => {
  it('refuses a loopback literal before connecting', async () => {
    const result = await post({ allowPrivate: false });
    expect(result).toEqual({ status: null, error: 'refused: 127.0.0.1 is a loopback/private address' });
    expect(await post({ url: `http://[::1]:${port}/ok`, allowPrivate: false })).toEqual({ status: null, error: 'refused: ::1 is a loopback/private address' });
    expect(connections).toBe(0);
    expect(received).toEqual([]);
  });

  it('refuses a hostname that resolves to loopback at connection time (DNS rebinding)', async () => {
    const result = await post({ url: `http://rebind.test:${port}/ok`, allowPrivate: false, lookup: toLoopback });
    expect(result.status).toBeNull();
    expect(result.error).toBe('refused: rebind.test resolves to 127.0.0.1, a loopback/private address');
    expect(connections).toBe(0);
    expect(received).toEqual([]);
  });

  it('connects to whatever the hook resolves when private receivers are allowed', async () => {
    const result = await post({ url: `http://rebind.test:${port}/ok`, allowPrivate: true, lookup: toLoopback });
    expect(result).toEqual({ status: 200, error: null, retryAfter: null });
    expect(received.map((r) => r.headers.host)).toEqual([`rebind.test:${port}`]);
  });

  it.each([true, false])('resolves through the hook whether or not Node asks for all addresses (autoSelectFamily %s)', async (auto) => {
    const before = getDefaultAutoSelectFamily();
    setDefaultAutoSelectFamily(auto);
    try {
      const url = `http://rebind.test:${port}/ok`;
      expect(await post({ url, allowPrivate: true, lookup: toLoopback })).toEqual({ status: 200, error: null, retryAfter: null });
      expect((await post({ url, allowPrivate: false, lookup: toLoopback })).error).toMatch(/^refused: /);
      expect(received).toHaveLength(1);
    } finally {
      setDefaultAutoSelectFamily(before);
    }
  });

  it('catches a name that was public at creation and rebinds before delivery', async () => {
    let calls = 0;
    const rebinding: Lookup = async () => [{ address: calls++ === 0 ? '93.184.216.34' : '127.0.0.1', family: 4 }];
    const url = `http://rebind.test:${port}/ok`;

    expect(await checkReceiverUrl(url, { allowPrivate: false, lookup: rebinding })).toBeNull();
    const result = await post({ url, allowPrivate: false, lookup: rebinding });
    expect(result.error).toMatch(/^refused: rebind\.test resolves to 127\.0\.0\.1/);
    expect(calls).toBe(2);
    expect(connections).toBe(0);
  });

  it('refuses when any resolved address is private, even if a public one comes first', async () => {
    const mixed: Lookup = async () => [
      { address: '93.184.216.34', family: 4 },
      { address: '127.0.0.1', family: 4 },
    ];
    const result = await post({ url: `http://mixed.test:${port}/ok`, allowPrivate: false, lookup: mixed });
    expect(result.error).toMatch(/resolves to 127\.0\.0\.1/);
    expect(connections).toBe(0);
  });
});
