import { pack, unpack } from 'msgpackr';
import WebSocket from 'ws';
import { ADMIN_KEY } from './server.js';

/** A real `ws` client of `GET /events/stream` (DESIGN §9), as the stream suites drive it. */
export interface StreamClient {
  ws: WebSocket;
  /** Every frame the server sent, decoded. */
  frames: any[];
  /** Resolves with the next `n` frames (from those not yet taken). */
  next(n?: number): Promise<any[]>;
  send(frame: unknown): void;
  /** Resolves with the close code and reason once the connection is closed, by either side. */
  closed: Promise<{ code: number; reason: string }>;
  close(): Promise<void>;
}

/** The TCP socket under a `ws` client, to stop (and resume) reading from the server. */
export const rawSocket = (ws: WebSocket): { pause(): void; resume(): void } => (ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;

/** Opens a stream (ADMIN_KEY unless `key` says otherwise; null: no key); rejects with `status` and `body` when the upgrade is refused. */
export function openStream(url: string, options: { key?: string | null; protocol?: string } = {}): Promise<StreamClient> {
  const headers: Record<string, string> = {};
  const key = options.key === undefined ? ADMIN_KEY : options.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/events/stream', options.protocol === undefined ? [] : [options.protocol], { headers });
  const binary = options.protocol === 'vigil.v1+msgpack';
  const frames: any[] = [];
  let taken = 0;
  let wake: (() => void) | null = null;
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    frames.push(isBinary ? unpack(data) : JSON.parse(data.toString('utf8')));
    wake?.();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString('utf8') })));
  const client: StreamClient = {
    ws,
    frames,
    async next(n = 1) {
      const deadline = Date.now() + 10_000;
      while (frames.length < taken + n) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} frame(s); have ${frames.length - taken}`);
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 100);
        });
      }
      taken += n;
      return frames.slice(taken - n, taken);
    },
    send(frame) {
      ws.send(binary ? pack(frame) : JSON.stringify(frame), { binary });
    },
    closed,
    close() {
      return new Promise((resolve) => {
        if (ws.readyState === WebSocket.CLOSED) return resolve();
        ws.once('close', () => resolve());
        ws.close();
      });
    },
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(client));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode, body })));
    });
    ws.once('error', reject);
  });
}
