/**
 * Many tenants: the same durable ingest load on one org, then spread round robin over `orgs` orgs
 * (one key each, every org on a paid plan), against one Vigil (sync), interleaved round by round.
 * Over HTTP (`POST /events/`, the load generator's requests taking the orgs' keys in turn) and
 * over the stream (one socket per org; the single-org run has as many sockets, all of one org).
 */
import { rmSync } from 'node:fs';
import { runLoad } from './load.js';
import { BENCH_EVENT, BENCH_KEY, median, startVigil, tenantKey, type MacroOptions } from './macro.js';
import { cpuSeconds } from './proc-cpu.js';
import { streamChild } from './stream.js';
import type { StreamLoadSpec } from './stream-load.js';

export interface TenantFigures {
  orgs: number;
  /** req/s per round: one org, then the same load over `orgs` orgs. */
  httpSingle: number[];
  httpMany: number[];
  httpRatio: number;
  /**
   * The server's CPU (all its threads, from /proc) per request over the measured window, µs, per
   * round: what the org count costs, less moved than req/s by other work on a shared machine.
   */
  httpCpuSingle: number[];
  httpCpuMany: number[];
  httpCpuRatio: number;
  /** events/s per round, as above. */
  streamSingle: number[];
  streamMany: number[];
  streamRatio: number;
  streamShape: { connections: number; window: number; events: number };
}

const STREAM_SHAPE = { window: 2, events: 25 };

export async function runTenants(options: MacroOptions, orgs: number): Promise<TenantFigures> {
  const vigil = await startVigil('sync', orgs);
  const keys = Array.from({ length: orgs }, (_, i) => tenantKey(i));
  const figures: TenantFigures = { orgs, httpSingle: [], httpMany: [], httpRatio: NaN, httpCpuSingle: [], httpCpuMany: [], httpCpuRatio: NaN, streamSingle: [], streamMany: [], streamRatio: NaN, streamShape: { connections: orgs, ...STREAM_SHAPE } };
  try {
    const http = async (rotation: string[]): Promise<[number, number]> => {
      const spec = {
        url: `${vigil.url}/events/`,
        method: 'POST' as const,
        headers: { 'content-type': 'application/json' },
        rotate: rotation.map((key) => ({ authorization: `Bearer ${key}` })),
        body: BENCH_EVENT,
        connections: options.connections,
      };
      if (options.warmupSeconds > 0) await runLoad({ ...spec, durationSec: options.warmupSeconds });
      const cpuBefore = cpuSeconds(vigil.proc.pid);
      const result = await runLoad({ ...spec, durationSec: options.seconds });
      const cpuUs = ((cpuSeconds(vigil.proc.pid) - cpuBefore) * 1e6) / result.requests;
      if (result.errors > 0) throw new Error(`tenants bench: ${result.errors} errors over HTTP`);
      return [Math.round(result.rps), Math.round(cpuUs)];
    };
    const stream = async (rotation: string[]): Promise<number> => {
      const spec: StreamLoadSpec = {
        url: `${vigil.url.replace('http', 'ws')}/events/stream`,
        key: rotation[0]!,
        keys: rotation,
        connections: orgs,
        ...STREAM_SHAPE,
        encoding: 'msgpack',
        seconds: options.seconds,
        warmup: options.warmupSeconds,
        event: JSON.parse(BENCH_EVENT) as Record<string, unknown>,
        keyed: true,
      };
      const result = await streamChild(spec);
      if (result.errors > 0) throw new Error(`tenants bench: ${result.errors} errors over the stream`);
      return result.eventsPerSec;
    };
    // One org and many alternate which goes first, round by round (as the macro's targets do).
    const pair = async <T>(run: (rotation: string[]) => Promise<T>, round: number): Promise<[T, T]> => {
      if (round % 2 === 1) return [await run([BENCH_KEY]), await run(keys)];
      const many = await run(keys);
      return [await run([BENCH_KEY]), many];
    };
    for (let round = 1; round <= options.rounds; round++) {
      const [[httpOne, cpuOne], [httpMany, cpuMany]] = await pair(http, round);
      figures.httpSingle.push(httpOne);
      figures.httpMany.push(httpMany);
      figures.httpCpuSingle.push(cpuOne);
      figures.httpCpuMany.push(cpuMany);
      options.log(`round ${round}/${options.rounds}  POST /events/ one org ${httpOne} req/s (${cpuOne} µs CPU/req), ${orgs} orgs ${httpMany} req/s (${cpuMany} µs CPU/req)`);
      const [streamOne, streamMany] = await pair(stream, round);
      figures.streamSingle.push(streamOne);
      figures.streamMany.push(streamMany);
      options.log(`round ${round}/${options.rounds}  stream (${orgs} sockets) one org ${streamOne} events/s, ${orgs} orgs ${streamMany} events/s`);
    }
  } finally {
    await vigil.proc.stop();
    rmSync(vigil.dir, { recursive: true, force: true });
  }
  // The median of the rounds' ratios, as for the macro's.
  const ratio = (many: number[], single: number[]): number => Math.round(median(many.map((m, i) => m / single[i]!)) * 100) / 100;
  figures.httpRatio = ratio(figures.httpMany, figures.httpSingle);
  figures.httpCpuRatio = ratio(figures.httpCpuMany, figures.httpCpuSingle);
  figures.streamRatio = ratio(figures.streamMany, figures.streamSingle);
  return figures;
}
