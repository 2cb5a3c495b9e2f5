/**
 * Fairness: one org's flood must not starve another org's writes. One Vigil (`sync`), org B
 * (`tenant-0`) probed by one connection sending durable `POST /events/` one after another
 * (bench/fairness-probe.ts), alone and then while org A (`bench`) saturates its writer over the
 * stream, the hardest flood (a frame queues 1,000 commands in one turn; 64 HTTP connections queue
 * 64): sockets of 1,000-event frames (the largest a frame takes), enough in flight to keep A's
 * queue near VIGIL_MAX_PENDING. The figure is B's p99 with A's flood over B's p99 alone, per round
 * (the order of the two turning round by round), then the median; the goal is at most 2×.
 */
import { rmSync } from 'node:fs';
import { BENCH_EVENT, BENCH_KEY, median, startVigil, tenantKey } from './macro.js';
import type { ProbeResult, ProbeSpec } from './fairness-probe.js';
import { child } from './stream.js';
import type { StreamLoadResult, StreamLoadSpec } from './stream-load.js';

export interface FairnessOptions {
  rounds: number;
  seconds: number;
  warmupSeconds: number;
  log: (line: string) => void;
}

export interface FairnessRound {
  alone: ProbeResult;
  flooded: ProbeResult;
  /** Org A's acknowledged events/s while B was probed, and its events not acknowledged. */
  flood: StreamLoadResult;
  /** B's p99 flooded over alone. */
  ratio: number;
}

export interface FairnessFigures {
  /** A's load: sockets, frames in flight per socket, events per frame. */
  shape: { connections: number; window: number; events: number };
  rounds: FairnessRound[];
  /** Medians of the rounds. */
  aloneP50: number;
  aloneP99: number;
  floodedP50: number;
  floodedP99: number;
  ratio: number;
  floodEventsPerSec: number;
  /** Requests or events not acknowledged, over every round: B's and A's. */
  probeErrors: number;
  floodErrors: number;
}

/** 4 × 2 × 1,000 = 8,000 of A's events in flight, under VIGIL_MAX_PENDING (10,000), so none is refused. */
export const FLOOD_SHAPE = { connections: 4, window: 2, events: 1000 };
const ORG_A_KEY = BENCH_KEY;
const ORG_B_KEY = tenantKey(0);

export async function runFairness(options: FairnessOptions): Promise<FairnessFigures> {
  const vigil = await startVigil('sync', 1);
  const rounds: FairnessRound[] = [];
  try {
    const probeSpec: ProbeSpec = { url: `${vigil.url}/events/`, key: ORG_B_KEY, body: BENCH_EVENT, seconds: options.seconds, warmup: options.warmupSeconds };
    // B's ledger has no writer but the probe: its event ids run on from 1, probe after probe, or
    // the probe measured something else (another org's writes, refusals).
    let nextId = 1;
    const alone = async (): Promise<ProbeResult> => {
      const result = await child<ProbeResult>('bench/fairness-probe.ts', probeSpec);
      if (result.errors > 0 || result.requests === 0) throw new Error(`fairness bench: org B's probe had ${result.errors} errors in ${result.requests} requests (first: ${result.firstError})`);
      if (!result.consecutive || result.firstEventId !== nextId) throw new Error(`fairness bench: org B's event ids ${result.firstEventId}..${result.lastEventId} do not follow ${nextId - 1} one by one`);
      nextId = result.lastEventId! + 1;
      return result;
    };
    const flooded = async (): Promise<[ProbeResult, StreamLoadResult]> => {
      // The flood starts first and runs over the probe's whole window: its own warm-up, then the probe's.
      const floodSpec: StreamLoadSpec = {
        url: `${vigil.url.replace('http', 'ws')}/events/stream`,
        key: ORG_A_KEY,
        ...FLOOD_SHAPE,
        encoding: 'msgpack',
        // A second longer than the probe's window at either end: the two processes start unevenly.
        seconds: options.seconds + 1,
        warmup: options.warmupSeconds + FLOOD_LEAD_SECONDS - 0.5,
        event: JSON.parse(BENCH_EVENT) as Record<string, unknown>,
        keyed: false,
      };
      const flood = child<StreamLoadResult>('bench/stream-load.ts', floodSpec).then((result) => {
        if (result.errors > 0 || result.events === 0) throw new Error(`fairness bench: org A's flood had ${result.errors} events refused, ${result.events} acknowledged`);
        return result;
      });
      await new Promise((resolve) => setTimeout(resolve, FLOOD_LEAD_SECONDS * 1000));
      return Promise.all([alone(), flood]);
    };
    await flooded(); // warm the server (JIT, the ledger's pages), as the other scenarios do
    for (let round = 1; round <= options.rounds; round++) {
      let a: ProbeResult;
      let f: [ProbeResult, StreamLoadResult];
      if (round % 2 === 1) {
        a = await alone();
        f = await flooded();
      } else {
        f = await flooded();
        a = await alone();
      }
      const ratio = Math.round((f[0].p99 / a.p99) * 100) / 100;
      rounds.push({ alone: a, flooded: f[0], flood: f[1], ratio });
      options.log(
        `round ${round}/${options.rounds}  org B alone p50 ${a.p50} p99 ${a.p99} ms (${a.requests} req)  flooded p50 ${f[0].p50} p99 ${f[0].p99} ms (${f[0].requests} req)  ` +
          `→ ${ratio}×  org A ${f[1].eventsPerSec} events/s  errors B ${a.errors + f[0].errors} A ${f[1].errors}`,
      );
    }
  } finally {
    await vigil.proc.stop();
    rmSync(vigil.dir, { recursive: true, force: true });
  }
  return {
    shape: FLOOD_SHAPE,
    rounds,
    aloneP50: median(rounds.map((r) => r.alone.p50)),
    aloneP99: median(rounds.map((r) => r.alone.p99)),
    floodedP50: median(rounds.map((r) => r.flooded.p50)),
    floodedP99: median(rounds.map((r) => r.flooded.p99)),
    ratio: median(rounds.map((r) => r.ratio)),
    floodEventsPerSec: median(rounds.map((r) => r.flood.eventsPerSec)),
    probeErrors: rounds.reduce((n, r) => n + r.alone.errors + r.flooded.errors, 0),
    floodErrors: rounds.reduce((n, r) => n + r.flood.errors, 0),
  };
}

/** The goal line of the report: B's p99 with A's flood at most 2× its p99 alone. */
export function fairnessGoal(f: FairnessFigures): { name: string; target: string; measured: string; met: boolean } {
  return {
    name: 'org B p99 while org A floods its writer vs alone (same run)',
    target: '≤ 2.0×',
    measured: `${f.ratio}× (${f.floodedP99} vs ${f.aloneP99} ms; A ${f.floodEventsPerSec.toLocaleString('en-US')} events/s)`,
    met: f.ratio <= 2,
  };
}

/** Seconds the flood runs before the probe starts (A's queue filled, its sockets open). */
const FLOOD_LEAD_SECONDS = 1;
