/**
 * The fairness bench's probe, run as its own process (`node --import tsx bench/fairness-probe.ts
 * <json>`) so its timing does not share a thread with the load: one keep-alive connection sending
 * org B's durable `POST /events/` one after another, the next when the last is answered. Prints one
 * JSON line: the latency percentiles of the requests answered in the measured window, and the
 * event ids B was given (B's ledger has no other writer, so they must run on without a gap).
 */
import { Agent, request } from 'node:http';
import { childMain, sleep } from './child-main.js';

export interface ProbeSpec {
  /** `http://host:port/events/`. */
  url: string;
  key: string;
  /** The event sent, as JSON. */
  body: string;
  seconds: number;
  warmup: number;
}

export interface ProbeResult {
  /** Requests answered with an event in the measured window. */
  requests: number;
  /** Milliseconds, 2 decimals, of the measured window's requests. */
  p50: number;
  p99: number;
  max: number;
  /** Answers without an event (any status but 200, or a body without event_id), and socket errors. */
  errors: number;
  /** The first error's status and body, for the log. */
  firstError: string | null;
  /** The event ids answered, warm-up included, in the order sent. */
  firstEventId: number | null;
  lastEventId: number | null;
  /** Whether every event id was the one before plus one. */
  consecutive: boolean;
  seconds: number;
}

/** Sends B's events for `warmup` + `seconds` seconds and measures the second part. */
async function main(spec: ProbeSpec): Promise<ProbeResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | null = null;
  let firstEventId: number | null = null;
  let lastEventId: number | null = null;
  let consecutive = true;
  let measuring = false;
  let stopping = false;
  const loop = (async () => {
    while (!stopping) {
      const started = performance.now();
      const answer = await post(agent, spec);
      const took = performance.now() - started;
      const id = answer.status === 200 ? eventIdOf(answer.text) : null;
      if (id === null) {
        errors += measuring ? 1 : 0;
        firstError ??= `${answer.status} ${answer.text.slice(0, 200)}`;
        continue;
      }
      if (lastEventId !== null && id !== lastEventId + 1) consecutive = false;
      firstEventId ??= id;
      lastEventId = id;
      if (measuring) latencies.push(took);
    }
  })();
  await sleep(spec.warmup * 1000);
  measuring = true;
  const t0 = performance.now();
  await sleep(spec.seconds * 1000);
  measuring = false;
  const seconds = (performance.now() - t0) / 1000;
  stopping = true;
  await loop;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number): number => round2(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN);
  return { requests: latencies.length, p50: at(0.5), p99: at(0.99), max: round2(latencies.at(-1) ?? NaN), errors, firstError, firstEventId, lastEventId, consecutive, seconds };
}

function post(agent: Agent, spec: ProbeSpec): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const req = request(spec.url, { method: 'POST', agent, headers: { authorization: `Bearer ${spec.key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(spec.body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', (error) => resolve({ status: 0, text: error.message }));
    });
    req.on('error', (error) => resolve({ status: 0, text: error.message }));
    req.end(spec.body);
  });
}

function eventIdOf(text: string): number | null {
  try {
    const id = (JSON.parse(text) as { event_id?: unknown }).event_id;
    return typeof id === 'number' && Number.isInteger(id) ? id : null;
  } catch {
    return null;
  }
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

childMain(main);
