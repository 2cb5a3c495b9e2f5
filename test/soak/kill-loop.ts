/**
 * Soak: kill -9 in a loop under concurrent writers, hundreds of cycles on one data dir.
 *
 *   node --import tsx test/soak/kill-loop.ts --cycles 300 [--writers 8] [--agents 4] [--seed n]
 *     [--kill-after-ms 50,600] [--durability sync|process] [--verify-every 10] [--data-dir dir]
 *
 * Prints one line per cycle and a summary; exits 0 only if no acknowledged event was lost, the
 * chain is valid and nothing else went wrong.
 */
import { parseArgs } from 'node:util';
import { runKillLoop, type CycleReport } from '../support/kill-loop.js';

const USAGE =
  'usage: node --import tsx test/soak/kill-loop.ts --cycles 300 [--writers 8] [--agents 4] [--seed n] [--kill-after-ms 50,600] [--durability sync|process] [--verify-every 10] [--data-dir dir]';

/** A bad flag: one line and the usage, exit 2, no stack. */
function usage(message: string): never {
  console.error(`${message}\n${USAGE}`);
  process.exit(2);
}

function readArgs() {
  try {
    return parseArgs({
      options: {
        cycles: { type: 'string', default: '300' },
        writers: { type: 'string', default: '8' },
        agents: { type: 'string', default: '4' },
        seed: { type: 'string' },
        'kill-after-ms': { type: 'string', default: '50,600' },
        durability: { type: 'string', default: 'sync' },
        'verify-every': { type: 'string', default: '10' },
        'data-dir': { type: 'string' },
      },
    });
  } catch (error) {
    return usage((error as Error).message);
  }
}

const { values } = readArgs();

function positive(name: string, text: string): number {
  const n = Number(text);
  return Number.isInteger(n) && n >= 1 ? n : usage(`--${name} must be a positive integer, got ${text}`);
}

const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
if (!Number.isInteger(seed)) usage(`--seed must be an integer, got ${values.seed}`);
const [min, max] = values['kill-after-ms'].split(',').map(Number);
if (!(Number.isFinite(min) && Number.isFinite(max) && min! >= 0 && max! >= min!)) usage('--kill-after-ms is min,max in milliseconds');
if (values.durability !== 'sync' && values.durability !== 'process') usage('--durability is sync or process');
const cycles = positive('cycles', values.cycles);
const writers = positive('writers', values.writers);
const agents = positive('agents', values.agents);
const verifyEvery = positive('verify-every', values['verify-every']);

const line = (c: CycleReport): string =>
  [
    `cycle ${String(c.cycle).padStart(4)}`,
    `ran ${String(c.ranMs).padStart(5)} ms`,
    `sent ${String(c.sent).padStart(6)}`,
    `acked ${String(c.acked).padStart(6)}`,
    `lost ${c.lost}`,
    `new rows ${String(c.rows).padStart(6)}`,
    `ledger ${String(c.length).padStart(8)}`,
    `restart ${String(c.restartMs).padStart(5)} ms`,
    `chain ${c.chainOk ? 'ok' : 'BROKEN'}`,
    ...c.problems.map((p) => `\n    ${p}`),
  ].join('  ');

console.log(`kill -9 soak: seed ${seed}, ${cycles} cycles, ${writers} writers, durability ${values.durability}`);
const started = Date.now();
const report = await runKillLoop({
  cycles,
  writers,
  agents,
  seed,
  killAfterMs: [min!, max!],
  env: { VIGIL_DURABILITY: values.durability },
  fullVerifyEvery: verifyEvery,
  onCycle: (c) => console.log(line(c)),
  ...(values['data-dir'] === undefined ? {} : { dataDir: values['data-dir'] }),
});
const failed = report.lost > 0 || !report.chainValid || report.problems.length > 0;
console.log(
  [
    '',
    `summary (seed ${report.seed}, ${Math.round((Date.now() - started) / 1000)} s)`,
    `  cycles               ${report.cycles.length}`,
    `  acked events         ${report.acked}`,
    `  acked events lost    ${report.lost}`,
    `  ledger length        ${report.length}`,
    `  chain valid          ${report.chainValid}`,
    `  problems             ${report.problems.length}`,
    ...report.problems.slice(0, 20).map((p) => `    ${p}`),
    failed ? 'FAILED' : 'OK',
  ].join('\n'),
);
process.exit(failed ? 1 : 0);
