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
      };
      const result = await streamChild(spec);
      if (result.errors > 0) throw new Error(`tenants bench: ${result.errors} errors over the stream`);
      return result.eventsPerSec;
    };
    for (let round = 1; round <= options.rounds; round++) {
      figures.httpSingle.push(await http([BENCH_KEY]));
      figures.httpMany.push(await http(keys));
      options.log(`round ${round}/${options.rounds}  POST /events/ one org ${figures.httpSingle.at(-1)} req/s, ${orgs} orgs ${figures.httpMany.at(-1)} req/s`);
      figures.streamSingle.push(await stream([BENCH_KEY]));
      figures.streamMany.push(await stream(keys));
      options.log(`round ${round}/${options.rounds}  stream (${orgs} sockets) one org ${figures.streamSingle.at(-1)} events/s, ${orgs} orgs ${figures.streamMany.at(-1)} events/s`);
    }
  } finally {
    await vigil.proc.stop();
    rmSync(vigil.dir, { recursive: true, force: true });
  }
  const ratio = (many: number[], single: number[]): number => Math.round((median(many) / median(single)) * 100) / 100;
  figures.httpRatio = ratio(figures.httpMany, figures.httpSingle);
  figures.streamRatio = ratio(figures.streamMany, figures.streamSingle);
  return figures;
}
