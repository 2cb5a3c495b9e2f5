/**
 * The scale-out bench's load generator, one process per Vigil node (`node --import tsx
 * bench/scale-load.ts <json>`), so no node's load shares a thread with another's or with the
 * bench. It says `ready` on stdout and waits for a line on stdin, so every generator of a round
 * starts together; then the warm-up, `measuring`, the measured run, and one JSON line: the run's
 * figures and this process's CPU seconds over it (with autocannon its own; with wrk, the wrk it
 * ran and waited for).
 */
import { createInterface } from 'node:readline';
import { childMain } from './child-main.js';
import { runLoad, type LoadResult, type LoadSpec } from './load.js';
import { selfCpuWithChildren } from './proc-cpu.js';

export interface ScaleLoadSpec {
  load: Omit<LoadSpec, 'durationSec'>;
  warmup: number;
  seconds: number;
}

export interface ScaleLoadResult extends LoadResult {
  cpuSeconds: number;
  /** Wall seconds of the measured run. */
  seconds: number;
}

async function main(spec: ScaleLoadSpec): Promise<ScaleLoadResult> {
  const lines = createInterface({ input: process.stdin });
  const go = new Promise<void>((resolve) => lines.once('line', () => resolve()));
  process.stdout.write('ready\n');
  await go;
  lines.close();
  if (spec.warmup > 0) await runLoad({ ...spec.load, durationSec: spec.warmup });
  process.stdout.write('measuring\n');
  const cpu0 = selfCpuWithChildren();
  const t0 = performance.now();
  const result = await runLoad({ ...spec.load, durationSec: spec.seconds });
  return { ...result, cpuSeconds: selfCpuWithChildren() - cpu0, seconds: (performance.now() - t0) / 1000 };
}

childMain(main);
