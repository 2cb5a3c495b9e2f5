/**
 * The stream bench's load generator, run as its own process (`node --import tsx
 * bench/stream-load.ts <json>`) so it does not share the server's thread: `connections` WebSockets
 * to `GET /events/stream`, each keeping `window` frames of `events` events in flight, for
 * `seconds` after `warmup` seconds. With `keyed`, every event carries an idempotency key, as
 * VigilClient gives them. Prints one JSON line: events/s, frame latency percentiles, this process's CPU seconds, and
 * the count of events not answered with a result (errors).
 */
import { pack, Unpackr } from 'msgpackr';
import WebSocket from 'ws';
import { clientKey } from '../src/client/vigil-client.js';
import { childMain, measureWindow, sleep } from './child-main.js';

export interface StreamLoadSpec {
  url: string;
  key: string;
  connections: number;
  window: number;
  events: number;
  seconds: number;
  warmup: number;
  encoding: 'json' | 'msgpack';
  /** The event sent. */
  event: Record<string, unknown>;
  /** Each copy gets an idempotency key of its own, as VigilClient gives them (one client per socket). */
  keyed: boolean;
  /** Orgs' keys to spread the connections over, round robin (default: `key` alone). */
  keys?: string[];
}

export interface StreamLoadResult {
  events: number;
  eventsPerSec: number;
  frames: number;
  p50: number;
  p99: number;
  errors: number;
  cpuSeconds: number;
  seconds: number;
}

const unpackr = new Unpackr({ int64AsType: 'number', mapsAsObjects: true, useRecords: false });

async function main(spec: StreamLoadSpec): Promise<StreamLoadResult> {
  const keys = spec.keys ?? [spec.key];
  let measuring = false;
  let stopping = false;
  const latencies: number[] = [];
  let events = 0;
  let frames = 0;
  let errors = 0;
  let serial = 0;
  const run = process.pid.toString(36);

  const sockets = await Promise.all(
    Array.from({ length: spec.connections }, (_, c) => {
      const ws = new WebSocket(spec.url, spec.encoding === 'msgpack' ? 'vigil.v1+msgpack' : 'vigil.v1+json', { headers: { authorization: `Bearer ${keys[c % keys.length]}` } });
      return new Promise<WebSocket>((resolve, reject) => {
        ws.once('open', () => resolve(ws));
        ws.once('error', reject);
        ws.once('unexpected-response', (_req, res) => reject(new Error(`stream upgrade refused: ${res.statusCode}`)));
      });
    }),
  );

  const done = sockets.map(
    (ws, c) =>
      new Promise<void>((resolve) => {
        const sent = new Map<number, number>();
        let made = 0;
        const send = (): void => {
          const id = ++serial;
          const batch = Array.from({ length: spec.events }, () => (spec.keyed ? { ...spec.event, idempotency_key: clientKey(`${run}-${c}`, ++made) } : spec.event));
          sent.set(id, performance.now());
          ws.send(spec.encoding === 'msgpack' ? pack({ id, events: batch }) : JSON.stringify({ id, events: batch }));
        };
        ws.on('message', (data: Buffer, isBinary: boolean) => {
          const frame = (isBinary ? unpackr.unpack(data) : JSON.parse(data.toString('utf8'))) as { id: number; results?: { event_id?: unknown }[]; error?: unknown };
          const started = sent.get(frame.id);
          sent.delete(frame.id);
          if (measuring && started !== undefined) {
            latencies.push(performance.now() - started);
            frames++;
            const ok = frame.results?.filter((r) => r.event_id !== undefined).length ?? 0;
            events += ok;
            errors += spec.events - ok;
          }
          if (!stopping) send();
          else if (sent.size === 0) resolve();
        });
        ws.on('close', () => resolve());
        for (let i = 0; i < spec.window; i++) send();
      }),
  );

  const { seconds, cpuSeconds } = await measureWindow(spec.warmup, spec.seconds, (on) => (measuring = on));
  stopping = true;
  await Promise.race([Promise.all(done), sleep(10_000)]);
  for (const ws of sockets) ws.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number): number => Math.round((latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN) * 100) / 100;
  return { events, eventsPerSec: Math.round(events / seconds), frames, p50: at(0.5), p99: at(0.99), errors, cpuSeconds, seconds };
}

childMain(main);
