/**
 * Stream bench: durable ingest over `GET /events/stream` (embedded, sync durability), its load
 * generator a separate process (bench/stream-load.ts), against two peers measured in the same run,
 * interleaved round by round: a local nats-server JetStream stream (file storage, R1) taking the
 * same events as one async-published message each (bench/jetstream-load.ts, also its own process),
 * and the bare LMDB batched append of the same rows (in this process, as the micro bench does).
 * The per-request `POST /events/` rate it is compared with comes from the macro bench of the run.
 * CPU is read per process over the measured window: the server's from /proc, the generators' own.
 */
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { natsServerBin, startNats } from '../test/support/nats.js';
import type { JetStreamLoadResult, JetStreamLoadSpec } from './jetstream-load.js';
import { BENCH_EVENT, BENCH_KEY, median, startVigil, type MacroOptions } from './macro.js';
import { sleep } from './child-main.js';
import { lmdbTarget } from './micro.js';
import { cpuSeconds } from './proc-cpu.js';
import type { StreamLoadResult, StreamLoadSpec } from './stream-load.js';

export interface StreamFigures {
  /** Events per frame, connections, frames in flight per connection. */
  shape: { events: number; connections: number; window: number; encoding: 'json' | 'msgpack' };
  /**
   * Per round, then the median: acknowledged events/s over the stream, of the event the
   * per-request `POST /events/` and the peers take (no idempotency key): what the goals compare.
   */
  rounds: number[];
  eventsPerSec: number;
  p50FrameMs: number;
  p99FrameMs: number;
  errors: number;
  /** The same with an idempotency key on every event, as VigilClient sends them (the key index's cost). */
  keyed: { rounds: number[]; eventsPerSec: number; p99FrameMs: number; errors: number };
  /** The unkeyed stream against a server with the transparency log off (its Merkle trees not fed): the log's cost on the stream. */
  noLog: { rounds: number[]; eventsPerSec: number; ratio: number };
  /** Share of one core over the measured window (1 = a whole core), medians of the rounds. */
  serverCpu: number;
  loadCpu: number;
  /** Peers, medians of their rounds (null: no nats-server here). */
  jetstreamPerSec: number | null;
  jetstreamRounds: number[];
  lmdbRowsPerSec: number;
}

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
const SHAPE = { events: 200, connections: 4, window: 4, encoding: 'msgpack' as const };

export async function runStream(options: MacroOptions): Promise<StreamFigures> {
  const vigil = await startVigil('sync');
  const noLog = await startVigil('sync', 0, { transparencyLog: false });
  // The keyed variant on a server of its own: the two compared for the log take the same events,
  // and neither carries the other's ledger or idempotency index (on `vigil`, it took twice the
  // events of `noLog` and every key, and the ratio charged the log for them).
  const keyedVigil = await startVigil('sync');
  const nats = natsServerBin() === null ? null : await startNats({ nodes: 1 });
  if (nats === null) options.log('stream: no nats-server on PATH (Debian: apt-get install nats-server); the JetStream peer is skipped');
  const event = JSON.parse(BENCH_EVENT) as Record<string, unknown>;
  const rounds: StreamLoadResult[] = [];
  const keyedRounds: StreamLoadResult[] = [];
  const noLogRounds: StreamLoadResult[] = [];
  const cpu: number[] = [];
  const peer: JetStreamLoadResult[] = [];
  try {
    // Every server warmed before round 1, as the macro's targets are: the variant first in round 1
    // otherwise ran on a cold server (its JIT, a fresh ledger file) and lost about a fifth.
    for (const [server, keyed] of [[vigil, false], [keyedVigil, true], [noLog, false]] as const) {
      await streamChild({ url: `${server.url.replace('http', 'ws')}/events/stream`, key: BENCH_KEY, ...SHAPE, seconds: 2, warmup: 1, event, keyed });
    }
    for (let round = 1; round <= options.rounds; round++) {
      // Every variant each round, their order turning round by round.
      const variants = ['plain', 'keyed', 'no log'] as const;
      for (const variant of variants.map((_, i) => variants[(i + round - 1) % variants.length]!)) {
        const server = variant === 'no log' ? noLog : variant === 'keyed' ? keyedVigil : vigil;
        const keyed = variant === 'keyed';
        const spec: StreamLoadSpec = { url: `${server.url.replace('http', 'ws')}/events/stream`, key: BENCH_KEY, ...SHAPE, seconds: options.seconds, warmup: options.warmupSeconds, event, keyed };
        const [result, serverCpu] = await Promise.all([streamChild(spec), cpuOver(server.proc.pid, options.warmupSeconds, options.seconds)]);
        ({ plain: rounds, keyed: keyedRounds, 'no log': noLogRounds })[variant].push(result);
        if (variant === 'plain') cpu.push(serverCpu);
        options.log(`round ${round}/${options.rounds}  stream${variant === 'plain' ? '' : `, ${variant}`} ${SHAPE.connections}×${SHAPE.window} frames of ${SHAPE.events}  ${result.eventsPerSec.toString().padStart(7)} events/s  p99 ${result.p99} ms/frame  errors ${result.errors}  cpu server ${serverCpu.toFixed(2)} load ${(result.cpuSeconds / result.seconds).toFixed(2)}`);
      }
      if (nats !== null) {
        const js = await child<JetStreamLoadResult>('bench/jetstream-load.ts', { servers: nats.urls, stream: `BENCH_${round}`, connections: 4, window: 256, seconds: options.seconds, warmup: options.warmupSeconds, event } satisfies JetStreamLoadSpec);
        peer.push(js);
        options.log(`round ${round}/${options.rounds}  JetStream R1 file, async publish        ${js.messagesPerSec.toString().padStart(7)} msgs/s  errors ${js.errors}`);
      }
    }
  } finally {
    await Promise.allSettled([vigil.proc.stop(), noLog.proc.stop(), keyedVigil.proc.stop()]);
    await nats?.stop();
    for (const dir of [vigil.dir, noLog.dir, keyedVigil.dir]) rmSync(dir, { recursive: true, force: true });
  }
  const lmdbRowsPerSec = await lmdbRate(SHAPE.events, options.seconds);
  options.log(`LMDB batched append of ${SHAPE.events} rows (commit + fsync): ${lmdbRowsPerSec} rows/s`);
  return {
    shape: SHAPE,
    rounds: rounds.map((r) => r.eventsPerSec),
    eventsPerSec: median(rounds.map((r) => r.eventsPerSec)),
    p50FrameMs: median(rounds.map((r) => r.p50)),
    p99FrameMs: median(rounds.map((r) => r.p99)),
    errors: rounds.reduce((n, r) => n + r.errors, 0),
    keyed: {
      rounds: keyedRounds.map((r) => r.eventsPerSec),
      eventsPerSec: median(keyedRounds.map((r) => r.eventsPerSec)),
      p99FrameMs: median(keyedRounds.map((r) => r.p99)),
      errors: keyedRounds.reduce((n, r) => n + r.errors, 0),
    },
    noLog: {
      rounds: noLogRounds.map((r) => r.eventsPerSec),
      eventsPerSec: median(noLogRounds.map((r) => r.eventsPerSec)),
      // Round by round, as the macro ratios are.
      ratio: median(rounds.map((r, i) => Math.round((r.eventsPerSec / noLogRounds[i]!.eventsPerSec) * 100) / 100)),
    },
    serverCpu: median(cpu),
    loadCpu: median(rounds.map((r) => Math.round((r.cpuSeconds / r.seconds) * 100) / 100)),
    jetstreamPerSec: peer.length === 0 ? null : median(peer.map((r) => r.messagesPerSec)),
    jetstreamRounds: peer.map((r) => r.messagesPerSec),
    lmdbRowsPerSec,
  };
}

/** Bare LMDB appends of `size`-row batches, one commit at a time, for about `seconds`: rows/s. */
async function lmdbRate(size: number, seconds: number): Promise<number> {
  // Enough prebuilt rows for the window at the rate LMDB reaches here (~40k rows/s durable), no more: they sit in memory.
  const batches = Math.max(50, Math.round((seconds * 60_000) / size));
  const target = lmdbTarget(batches, size);
  try {
    const started = performance.now();
    let rows = 0;
    for (let i = 0; i < batches && performance.now() - started < seconds * 1000; i++) {
      await target.run();
      rows += size;
    }
    return Math.round(rows / ((performance.now() - started) / 1000));
  } finally {
    await target.teardown?.();
  }
}

/** The stream load generator, in its own process. */
export const streamChild = (spec: StreamLoadSpec): Promise<StreamLoadResult> => child<StreamLoadResult>('bench/stream-load.ts', spec);

/** Runs a bench script as its own Node process and returns the JSON it prints last. */
export function child<T>(script: string, spec: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify(spec)], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    proc.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    proc.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
    proc.on('exit', (code) => {
      const last = out.trim().split('\n').at(-1) ?? '';
      if (code === 0 && last.startsWith('{')) resolve(JSON.parse(last) as T);
      else reject(new Error(`${script} exited ${code}: ${err.slice(-2000)}`));
    });
  });
}

/** The CPU a process used over the window that starts `after` seconds from now and lasts `seconds`, as a share of one core. */
async function cpuOver(pid: number, after: number, seconds: number): Promise<number> {
  await sleep(after * 1000);
  const start = cpuSeconds(pid);
  const t0 = performance.now();
  await sleep(seconds * 1000);
  return Math.round(((cpuSeconds(pid) - start) / ((performance.now() - t0) / 1000)) * 100) / 100;
}
