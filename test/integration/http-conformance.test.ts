import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cannotRun } from '../support/faults.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { ADMIN_KEY, call, removeDir, ROOT, startServer, tempDir, type TestServer } from '../support/server.js';

// Issue 13, items 3 and 9, over raw sockets: pipelining, keep-alive, chunked bodies, limits, and
// the requests uWebSockets.js 20.30 drops before the app sees them, answered by the README's
// reverse proxy.

let server: TestServer;
let port: number;
let receiver: Receiver;
let hookId: number;
/** Released by the test: the receiver holds the webhook test route's answer until then. */
let release: () => void = () => {};

beforeAll(async () => {
  server = await startServer({ VIGIL_WEBHOOK_ALLOW_PRIVATE: '1' });
  port = Number(new URL(server.url).port);
  receiver = await startReceiver(() => new Promise<number>((resolve) => (release = () => resolve(200))));
  hookId = (await call(server.url, 'POST', '/webhooks', { body: { url: receiver.url(), events: ['gate.hold'] } })).body.id;
  await call(server.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } });
});
afterAll(async () => {
  release();
  await receiver.close();
  await server.close();
  removeDir(server.dataDir);
});

const auth = `Authorization: Bearer ${ADMIN_KEY}\r\n`;
const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;
const post = (path: string, body: string, extra = '') =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
const event = JSON.stringify({ agent_id: 'a', event_type: 'output_generated', payload: {} });

/** A raw connection: what was written, and the status lines read so far. */
class Conn {
  private readonly socket: net.Socket;
  text = '';
  closed = false;
  constructor(to: number) {
    this.socket = net.connect(to, '127.0.0.1');
    this.socket.on('data', (d: Buffer) => (this.text += d.toString('latin1')));
    this.socket.on('close', () => (this.closed = true));
    this.socket.on('error', () => {});
  }
  ready(): Promise<void> {
    return new Promise((resolve) => this.socket.once('connect', () => resolve()));
  }
  send(data: string): void {
    this.socket.write(data);
  }
  /** The status of every complete response read, framed by its Content-Length. */
  statuses(): number[] {
    const out: number[] = [];
    let at = 0;
    for (;;) {
      const head = this.text.indexOf('\r\n\r\n', at);
      if (head === -1) return out;
      const lines = this.text.slice(at, head).split('\r\n');
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!);
      if (status === null) throw new Error(`not a response: ${JSON.stringify(this.text.slice(at, at + 80))}`);
      const length = Number(lines.find((l) => /^content-length:/i.test(l))?.split(':')[1] ?? 0);
      if (this.text.length < head + 4 + length) return out;
      out.push(Number(status[1]));
      at = head + 4 + length;
    }
  }
  /** Waits until `n` answers came, or the connection closed, or the deadline passed. */
  async answers(n: number, ms = 5000): Promise<number[]> {
    const until = Date.now() + ms;
    while (this.statuses().length < n && !this.closed && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    return this.statuses();
  }
  /** Waits for the server to close the connection (false if it is still open after `ms`). */
  async waitClosed(ms: number): Promise<boolean> {
    const until = Date.now() + ms;
    while (!this.closed && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    return this.closed;
  }
  end(): void {
    this.socket.destroy();
  }
}

async function open(to = port): Promise<Conn> {
  const conn = new Conn(to);
  await conn.ready();
  return conn;
}

/** Resolves once the receiver holds the test route's delivery (the answer is then pending). */
async function held(before: number): Promise<void> {
  const until = Date.now() + 5000;
  while (receiver.received.length === before && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
  expect(receiver.received.length).toBe(before + 1);
}

describe('pipelining and keep-alive', () => {
  it('answers three pipelined GETs in one write, in order', async () => {
    const conn = await open();
    conn.send(get('/health') + get('/orgs/me') + get('/nope'));
    expect(await conn.answers(3)).toEqual([200, 401, 404]);
    expect(conn.closed).toBe(false);
    conn.end();
  });

  it('answers a request sent while an earlier answer is pending, in order (GET, then POST)', async () => {
    for (const next of [get('/health'), post('/events/', event)]) {
      const conn = await open();
      const before = receiver.received.length;
      conn.send(post(`/webhooks/${hookId}/test`, ''));
      await held(before);
      conn.send(next);
      await new Promise((r) => setTimeout(r, 50));
      expect(conn.statuses()).toEqual([]);
      release();
      expect(await conn.answers(2)).toEqual([200, 200]);
      expect(conn.text.indexOf('"delivered":true')).toBeLessThan(conn.text.lastIndexOf('HTTP/1.1 200'));
      conn.end();
    }
  });

  it('records no write whose connection uWebSockets.js closed before it was answered (pipelined in one write)', async () => {
    for (const next of [post('/events/', event), get('/health'), post('/agents/', JSON.stringify({ agent_id: 'behind', name: 'B' }))]) {
      const before = (await call(server.url, 'GET', '/audit/export')).text.trim().split('\n').length;
      const conn = await open();
      conn.send(post('/events/', event) + next);
      await conn.answers(2, 2000);
      const answered = conn.statuses().length;
      const after = (await call(server.url, 'GET', '/audit/export')).text.trim().split('\n').length;
      // Answered requests are recorded; unanswered ones are not (a client's retry records once).
      const writesAnswered = answered === 0 ? 0 : next.startsWith('GET') ? 1 : answered;
      expect(after - before, JSON.stringify(conn.statuses())).toBe(writesAnswered);
      conn.end();
    }
  });

  it('serves many requests on one keep-alive connection, durable POSTs included', async () => {
    const conn = await open();
    for (let i = 0; i < 20; i++) {
      conn.send(i % 2 === 0 ? post('/events/', event) : get('/health'));
      expect(await conn.answers(i + 1)).toHaveLength(i + 1);
    }
    expect(new Set(conn.statuses())).toEqual(new Set([200]));
    conn.end();
  });

  it('reads a chunked body', async () => {
    const conn = await open();
    const body = JSON.stringify({ agent_id: 'chunked', name: 'C' });
    const half = Math.floor(body.length / 2);
    conn.send(`POST /agents/ HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
    conn.send(`${half.toString(16)}\r\n${body.slice(0, half)}\r\n`);
    conn.send(`${(body.length - half).toString(16)}\r\n${body.slice(half)}\r\n0\r\n\r\n`);
    expect(await conn.answers(1)).toEqual([201]);
    conn.end();
  });
});

describe('limits and framing', () => {
  it('answers 413 to a body over 1 MiB, declared or streamed', async () => {
    const big = JSON.stringify({ agent_id: 'a', event_type: 'output_generated', payload: { x: 'y'.repeat(1024 * 1024) } });
    const declared = await open();
    declared.send(`POST /events/ HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${big.length}\r\n\r\n`);
    expect(await declared.answers(1)).toEqual([413]);
    declared.end();
    const streamed = await open();
    streamed.send(`POST /events/ HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
    streamed.send(`${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`);
    expect(await streamed.answers(1)).toEqual([413]);
    streamed.end();
  });

  it('refuses conflicting Content-Length headers with 400, closes, and runs nothing that follows', async () => {
    const before = (await call(server.url, 'GET', '/audit/export')).text;
    const lengths = (n: number) => `Content-Length: ${event.length}\r\nContent-Length: ${n}\r\n`;
    const alone = await open();
    alone.send(`POST /events/ HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\n${lengths(5)}\r\n${event}`);
    expect(await alone.answers(1)).toEqual([400]);
    expect(alone.text).toContain('conflicting Content-Length');
    expect(await alone.waitClosed(2000)).toBe(true);
    // The smuggling shape: a request hidden in the body by the second length.
    const smuggled = post('/agents/', JSON.stringify({ agent_id: 'smuggled', name: 'S' }));
    const conn = await open();
    conn.send(`POST /events/ HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\n${lengths(event.length + smuggled.length)}\r\n${event}${smuggled}`);
    expect(await conn.waitClosed(2000)).toBe(true);
    expect([[], [400]]).toContainEqual(conn.statuses());
    // Routes that read no body, the public ones and the catch-all included.
    for (const target of ['GET /public/agents/acme/a', 'GET /health', 'GET /nope', 'DELETE /webhooks/1']) {
      const hidden = await open();
      hidden.send(`${target} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`);
      expect(await hidden.waitClosed(2000), target).toBe(true);
      expect([[], [400]]).toContainEqual(hidden.statuses());
    }
    expect((await call(server.url, 'GET', '/audit/export')).text).toBe(before);
    expect((await call(server.url, 'GET', '/agents/smuggled')).status).toBe(404);
  });
});

/** The nginx server block of the README's Deployment section (tested as written). */
function readmeNginxSnippet(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const match = /```nginx\n([\s\S]*?)```/.exec(readme);
  if (match === null) throw new Error('README.md has no ```nginx block');
  return match[1]!;
}

const nginx = spawnSync('nginx', ['-v']).error === undefined;
if (!nginx) cannotRun('the reverse-proxy tests', 'nginx is not installed (apt-get install nginx-light)');

describe.skipIf(!nginx)('behind the README reverse proxy (nginx)', () => {
  let proxy: ChildProcess;
  let proxyPort: number;
  const prefix = tempDir('vigil-nginx-');
  beforeAll(async () => {
    proxyPort = await freePort();
    const server = readmeNginxSnippet().replace(/listen\s+\d+;/, `listen 127.0.0.1:${proxyPort};`).replace(/127\.0\.0\.1:8080/g, `127.0.0.1:${port}`);
    mkdirSync(join(prefix, 'logs'));
    writeFileSync(
      join(prefix, 'nginx.conf'),
      `daemon off;\nmaster_process off;\npid ${prefix}/nginx.pid;\nerror_log ${prefix}/logs/error.log;\nevents {}\nhttp {\n  access_log off;\n  client_body_temp_path ${prefix}/body;\n  proxy_temp_path ${prefix}/proxy;\n${server}\n}\n`,
    );
    proxy = spawn('nginx', ['-p', prefix, '-c', join(prefix, 'nginx.conf')], { stdio: 'ignore' });
    const until = Date.now() + 10_000;
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${proxyPort}/health`).then((r) => r.ok, () => false);
      if (ok) break;
      if (Date.now() > until) throw new Error('nginx did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  afterAll(() => {
    proxy?.kill('SIGKILL');
    removeDir(prefix);
  });

  const cases: [string, string, number][] = [
    ['an HTTP/1.0 request', 'GET /health HTTP/1.0\r\n\r\n', 200],
    ['an absolute-form target', 'GET http://x/health HTTP/1.1\r\nHost: x\r\n\r\n', 200],
    ['a header without a colon', 'GET /health HTTP/1.1\r\nHost: x\r\nBadHeader\r\n\r\n', 200],
    ['a 1 MiB header', `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(1024 * 1024)}\r\n\r\n`, 400],
    ['an HTTP/2.0 request line', 'GET /health HTTP/2.0\r\nHost: x\r\n\r\n', 505],
  ];
  for (const [what, request, status] of cases) {
    it(`answers ${what} (${status}); uWebSockets.js alone drops it unanswered`, async () => {
      const direct = await open();
      direct.send(request);
      await new Promise((r) => setTimeout(r, 200));
      expect(direct.statuses()).toEqual([]);
      direct.end();
      const proxied = await open(proxyPort);
      proxied.send(request);
      expect(await proxied.answers(1)).toEqual([status]);
      proxied.end();
    });
  }

  it('passes pipelined POSTs to Vigil one at a time, so each gets its answer', async () => {
    const conn = await open(proxyPort);
    conn.send(post('/events/', event) + post('/events/', event) + get('/health') + post('/events/', event));
    expect(await conn.answers(4)).toEqual([200, 200, 200, 200]);
    conn.end();
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(free));
    });
  });
}
