import { connect } from 'node:net';
import type { Answer } from './send.js';

/**
 * HTTP/1.1 over a raw socket (node:net), for what fetch cannot send: chunked bodies cut anywhere,
 * requests split across writes, pipelined requests, a body cut short.
 */

export interface RawResult {
  /** Final answers in order (1xx interim answers are skipped). */
  answers: Answer[];
  /** The server closed the connection. */
  closed: boolean;
}

/** A request's head; `headers` in order, as given (no Host unless given). */
export function head(method: string, path: string, headers: Record<string, string>): string {
  return `${method} ${path} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
}

/** `body` in chunked transfer coding, cut into chunks of the given sizes (the last one takes the rest). */
export function chunked(body: Buffer, sizes: number[]): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (const size of [...sizes, body.length]) {
    if (at >= body.length) break;
    const piece = body.subarray(at, Math.min(body.length, at + Math.max(1, size)));
    parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
    at += piece.length;
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

/** Cuts `bytes` at the given offsets (out-of-range ones ignored). */
export function cut(bytes: Buffer, offsets: number[]): Buffer[] {
  const points = [...new Set(offsets.filter((o) => o > 0 && o < bytes.length))].sort((a, b) => a - b);
  return [0, ...points].map((from, i) => bytes.subarray(from, points[i] ?? bytes.length));
}

/**
 * Writes the pieces one by one (each its own write, the socket without Nagle), then reads until
 * `expect` final answers came, the server closed, or `quietMs` passed without one (no answer is
 * not an error here: the caller decides). `end` half-closes after the last piece.
 */
export function exchange(port: number, pieces: Buffer[], options: { expect: number; end?: boolean; quietMs?: number }): Promise<RawResult> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    let buffer = Buffer.alloc(0);
    const answers: Answer[] = [];
    let closed = false;
    let timer: NodeJS.Timeout;
    const finish = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ answers, closed });
    };
    const quiet = (): void => {
      clearTimeout(timer);
      timer = setTimeout(finish, options.quietMs ?? 3_000);
    };
    socket.on('data', (data: Buffer) => {
      buffer = Buffer.concat([buffer, data]);
      for (let parsed = parse(buffer); parsed !== null; parsed = parse(buffer)) {
        buffer = buffer.subarray(parsed.used);
        if (parsed.answer.status >= 200) answers.push(parsed.answer);
      }
      if (answers.length >= options.expect) finish();
      else quiet();
    });
    socket.on('close', () => {
      closed = true;
      finish();
    });
    socket.on('error', () => {});
    socket.on('connect', () => void (async () => {
      quiet();
      for (const piece of pieces) {
        if (socket.destroyed) return;
        socket.write(piece);
        await new Promise((r) => setImmediate(r));
      }
      if (options.end === true) socket.end();
    })());
  });
}

/** One complete answer at the start of `bytes`, or null until it has all arrived. */
function parse(bytes: Buffer): { answer: Answer; used: number } | null {
  const end = bytes.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const [statusLine = '', ...lines] = bytes.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
  const headers = new Headers();
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  let at = end + 4;
  if (status < 200 || status === 204 || status === 304) return { answer: { status, headers, text: '' }, used: at };
  if (headers.get('transfer-encoding')?.toLowerCase() === 'chunked') {
    const parts: Buffer[] = [];
    for (;;) {
      const lineEnd = bytes.indexOf('\r\n', at);
      if (lineEnd < 0) return null;
      const size = parseInt(bytes.subarray(at, lineEnd).toString('latin1'), 16);
      if (bytes.length < lineEnd + 2 + size + 2) return null;
      parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
      if (size === 0) return { answer: { status, headers, text: Buffer.concat(parts).toString('utf8') }, used: at };
    }
  }
  const length = Number(headers.get('content-length') ?? 0);
  if (bytes.length < at + length) return null;
  return { answer: { status, headers, text: bytes.subarray(at, at + length).toString('utf8') }, used: at + length };
}
