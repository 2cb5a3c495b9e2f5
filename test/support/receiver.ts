import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request a receiver got, with the body's raw bytes exactly as they arrived. */
export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** When its body had arrived (ms since the epoch). */
  at: number;
}

/** A status with response headers (e.g. Retry-After). */
export interface Answer {
  status: number;
  headers: Record<string, string>;
}

/** What to do with the n-th request (0-based): answer a status (now or once the promise settles), or never answer. */
export type Reply = (request: Received, n: number) => number | Answer | 'hang' | Promise<number>;

/**
 * A real HTTP receiver on 127.0.0.1, port 0: records every request and answers with the status
 * `reply` chooses (200 unless told otherwise; `reply` may be swapped at any time).
 */
export interface Receiver {
  port: number;
  /** http://127.0.0.1:<port><path> */
  url(path?: string): string;
  received: Received[];
  /** Requests received and not answered (yet) whose connection is still open: attempts in flight here. */
  open: number;
  /** The most requests ever open at once. */
  mostOpen: number;
  reply: Reply;
  close(): Promise<void>;
}

export async function startReceiver(reply: Reply = () => 200): Promise<Receiver> {
  const received: Received[] = [];
  const receiver: Receiver = {
    port: 0,
    url: (path = '/hook') => `http://127.0.0.1:${receiver.port}${path}`,
    received,
    open: 0,
    mostOpen: 0,
    reply,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections(); // a 'hang' request is still open
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const request: Received = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks), at: Date.now() };
      const n = received.length;
      received.push(request);
      receiver.open++;
      receiver.mostOpen = Math.max(receiver.mostOpen, receiver.open);
      let closed = false;
      const close = () => {
        if (!closed) receiver.open--;
        closed = true;
      };
      // The sender giving up (its timeout) closes the connection: the request is no longer in flight.
      res.on('close', close);
      const status = receiver.reply(request, n);
      if (status === 'hang') return;
      void Promise.resolve(status).then((answer) => {
        const { status: code, headers } = typeof answer === 'number' ? { status: answer, headers: {} } : answer;
        res.writeHead(code, { 'content-type': 'text/plain', ...headers }).end('ok');
        close();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.port = (server.address() as AddressInfo).port;
  return receiver;
}

/** Polls `cond` until it holds (returns its value) or fails after timeoutMs with `what`. */
export async function waitFor<T>(cond: () => T | Promise<T>, timeoutMs = 5_000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await cond();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Waits out a window in which nothing may happen. Absence can only be observed over time; callers
 * make the window several times the retry delay they rule out.
 */
export function quietFor(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
