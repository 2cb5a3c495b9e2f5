/**
 * Many tenants: the same durable ingest load on one org, then spread round robin over `orgs` orgs
 * (one key each, every org on a paid plan), against one Vigil (sync), interleaved round by round.
 * Over HTTP (`POST /events/`, the load generator's requests taking the orgs' keys in turn) and
 * over the stream (one socket per org; the single-org run has as many sockets, all of one org).
 */
import { rmSync } from 'node:fs';
import { runLoad } from './load.js';
import { BENCH_EVENT, BENCH_KEY, median, startVigil, tenantKey, type MacroOptions } from './macro.js';
import { streamChild } from './stream.js';
import type { StreamLoadSpec } from './stream-load.js';

export interface TenantFigures {
  orgs: number;
  /** req/s per round: one org, then the same load over `orgs` orgs. */
  httpSingle: number[];
  httpMany: number[];
  httpRatio: number;
  /** events/s per round, as above. */
  streamSingle: number[];
  streamMany: number[];
  streamRatio: number;
  streamShape: { connections: number; window: number; events: number };
}

const STREAM_SHAPE = { window: 2, events: 25 };

export async function runTenants(options: MacroOptions, orgs = 200): Promise<TenantFigures> {
  const vigil = await startVigil('sync', orgs);
  const keys = Array.from({ length: orgs }, (_, i) => tenantKey(i));
  const figures: TenantFigures = { orgs, httpSingle: [], httpMany: [], httpRatio: NaN, streamSingle: [], streamMany: [], streamRatio: NaN, streamShape: { connections: orgs, ...STREAM_SHAPE } };
  try {
    const http = async (rotation: string[]): Promise<number> => {
      const spec = {
        url: `${vigil.url}/events/`,
        method: 'POST' as const,
        headers: { 'content-type': 'application/json' },
        rotate: rotation.map((key) => ({ authorization: `Bearer ${key}` })),
        body: BENCH_EVENT,
        connections: options.connections,
      };
      if (options.warmupSeconds > 0) await runLoad({ ...spec, durationSec: options.warmupSeconds });
      const result = await runLoad({ ...spec, durationSec: options.seconds });
      if (result.errors > 0) throw new Error(`tenants bench: ${result.errors} errors over HTTP`);
      return Math.round(result.rps);
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
    const pair = async (run: (rotation: string[]) => Promise<number>, round: number): Promise<[number, number]> => {
      if (round % 2 === 1) return [await run([BENCH_KEY]), await run(keys)];
      const many = await run(keys);
      return [await run([BENCH_KEY]), many];
    };
    for (let round = 1; round <= options.rounds; round++) {
      const [httpOne, httpMany] = await pair(http, round);
      figures.httpSingle.push(httpOne);
      figures.httpMany.push(httpMany);
      options.log(`round ${round}/${options.rounds}  POST /events/ one org ${httpOne} req/s, ${orgs} orgs ${httpMany} req/s`);
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
  figures.streamRatio = ratio(figures.streamMany, figures.streamSingle);
  return figures;
}
