/**
 * The measured rounds of one scale-out step: one load generator process per target URL
 * (bench/scale-load.ts), started together, and the CPU of every server process read from /proc
 * over the window in which all of them measure (from the last `measuring` to the last answer).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { LoadSpec } from './load.js';
import { cpuSeconds } from './proc-cpu.js';
import type { ScaleLoadResult, ScaleLoadSpec } from './scale-load.js';
import type { ScaleRound } from './scale-out-figures.js';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The server processes whose CPU a round reads, in node order (null: a nats-server not running). */
export interface ServerPids {
  nodes: number[];
  nats: (number | null)[];
}

interface LoadChild {
  ready: Promise<void>;
  measuring: Promise<void>;
  result: Promise<ScaleLoadResult>;
  go(): void;
  kill(): void;
}

function startLoadChild(spec: ScaleLoadSpec): LoadChild {
  const proc: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'bench/scale-load.ts', JSON.stringify(spec)], { cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (chunk: Buffer) => (err = (err + chunk.toString('utf8')).slice(-4000)));
  // One reader of stdout: the words it waits for, then the last line (the JSON answer).
  const waiting = new Map<string, () => void>();
  const said = (word: string): Promise<void> => new Promise((resolve) => waiting.set(word, resolve));
  const ready = said('ready');
  const measuring = said('measuring');
  let last = '';
  createInterface({ input: proc.stdout! }).on('line', (line) => {
    waiting.get(line)?.();
    last = line;
  });
  const result = new Promise<ScaleLoadResult>((resolve, reject) => {
    proc.once('exit', (code) => {
      if (code === 0 && last.startsWith('{')) resolve(JSON.parse(last) as ScaleLoadResult);
      else reject(new Error(`bench/scale-load.ts exited ${code}: ${err}`));
    });
  });
  // A generator that dies before `ready` or `measuring` must not leave the round waiting on it.
  const orDead = (p: Promise<void>): Promise<void> => Promise.race([p, result.then(() => undefined)]);
  return {
    ready: orDead(ready),
    measuring: orDead(measuring),
    result,
    go: () => proc.stdin!.end('go\n'),
    kill: () => proc.kill('SIGKILL'),
  };
}

/**
 * Runs one round: a generator per spec, all told to go at once, each with `warmup` s of warm-up
 * then `seconds` measured; returns the round's readings. A failed generator fails the round.
 */
export async function measureRound(specs: Omit<LoadSpec, 'durationSec'>[], pids: ServerPids, warmup: number, seconds: number): Promise<ScaleRound> {
  const children = specs.map((load) => startLoadChild({ load, warmup, seconds }));
  try {
    await Promise.all(children.map((c) => c.ready));
    children.forEach((c) => c.go());
    await Promise.all(children.map((c) => c.measuring));
    const read = (): { nodes: number[]; nats: number[] } => ({ nodes: pids.nodes.map(cpuSeconds), nats: pids.nats.map((p) => (p === null ? Number.NaN : cpuSeconds(p))) });
    const before = read();
    const t0 = performance.now();
    const results = await Promise.all(children.map((c) => c.result));
    const after = read();
    const windowSeconds = (performance.now() - t0) / 1000;
    return {
      rps: results.reduce((n, r) => n + r.rps, 0),
      p99: Math.max(...results.map((r) => r.p99)),
      errors: results.reduce((n, r) => n + r.errors, 0),
      acked: results.reduce((n, r) => n + Math.max(0, r.requests - r.errors), 0),
      windowSeconds,
      nodeCpu: after.nodes.map((x, i) => x - before.nodes[i]!),
      natsCpu: after.nats.map((x, i) => x - before.nats[i]!),
      loadCpu: results.map((r) => r.cpuSeconds),
      loadSeconds: results.map((r) => r.seconds),
    };
  } finally {
    children.forEach((c) => c.kill());
  }
}
