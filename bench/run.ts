/**
 * `npm run bench [-- --quick]`: micro benchmarks, the macro benchmark against peers, and the
 * ledger at scale. Prints a table, writes bench/results/latest.json and latest.md.
 * `npm run bench -- --targets <url>,<url> [--quick]`: only the macro load, against running nodes
 * (bench/targets.ts).
 * `npm run bench -- --only fairness|tenants|scale-out [--quick]`: only the fairness
 * (bench/fairness.ts), the many-tenant (bench/tenants.ts) or the scale-out (bench/scale-out.ts)
 * scenario, printed, not written to bench/results. `--orgs <n>` sets the many-tenant org count
 * (default 100, the issue's figure).
 */
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { runLedger } from './ledger.js';
import { loadTool, wrkThreads } from './load.js';
import { runCluster } from './cluster.js';
import { fairnessGoal, runFairness } from './fairness.js';
import { median, runMacro } from './macro.js';
import { runMicro } from './micro.js';
import { runStream } from './stream.js';
import { runTenants } from './tenants.js';
import { fairnessText, goalsText, printReport, scaleOutText, tenantsText, writeReport, type BenchReport, type MacroRow, type Ratio } from './report.js';
import { runScaleOut } from './scale-out.js';
import { scaleOutGoals } from './scale-out-figures.js';
import { benchTargets, parseTargets } from './targets.js';

const quick = process.argv.includes('--quick');
const log = (line: string): void => console.log(line);
const started = performance.now();

let targets: string[] | null = null;
try {
  targets = parseTargets(process.argv.slice(2));
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exit(2);
}
if (targets !== null) {
  log(`Vigil bench against ${targets.join(', ')} (${quick ? 'quick' : 'full'}), load generator: ${loadTool() === 'wrk' ? `wrk with ${wrkThreads()} thread(s)` : 'autocannon'}`);
  process.exit(await benchTargets(targets, quick, process.env.VIGIL_BENCH_KEY, log));
}

const fairnessTiming = quick ? { rounds: 1, seconds: 3, warmupSeconds: 1, log } : { rounds: 3, seconds: 3, warmupSeconds: 1, log };
const tenantTiming = quick ? { rounds: 1, seconds: 3, warmupSeconds: 1, connections: 64, log } : { rounds: 3, seconds: 5, warmupSeconds: 1, connections: 64, log };
// 48 connections in all at every step: split evenly over 1, 2 and 3 nodes.
const scaleOutTiming = quick ? { rounds: 1, seconds: 3, warmupSeconds: 1, connections: 48, log } : { rounds: 3, seconds: 8, warmupSeconds: 2, connections: 48, log };
const orgsAt = process.argv.indexOf('--orgs');
const tenantOrgs = orgsAt === -1 ? 100 : Number(process.argv[orgsAt + 1]);
if (!Number.isInteger(tenantOrgs) || tenantOrgs < 2 || tenantOrgs > 1000) {
  console.error('--orgs takes an integer from 2 to 1000');
  process.exit(2);
}
const only = process.argv.indexOf('--only');
if (only !== -1) {
  const scenario = process.argv[only + 1];
  if (scenario !== 'fairness' && scenario !== 'tenants' && scenario !== 'scale-out') {
    console.error('--only takes one scenario: fairness, tenants or scale-out');
    process.exit(2);
  }
  log(`Vigil bench, ${scenario} only (${quick ? 'quick' : 'full'})`);
  if (scenario === 'scale-out') {
    const figures = await runScaleOut(scaleOutTiming);
    const goals = scaleOutGoals(figures);
    log(`\n${scaleOutText(figures)}${goals.length === 0 ? '' : `\n\n${goalsText(goals)}`}`);
    // Goals not met are figures, not failures; a request refused or lost is a failure.
    process.exit(figures.steps.some((s) => s.errors > 0) ? 1 : 0);
  }
  if (scenario === 'tenants') {
    const figures = await runTenants(tenantTiming, tenantOrgs);
    log(`\n${tenantsText(figures)}`);
    process.exit(0);
  }
  const figures = await runFairness(fairnessTiming);
  const goal = fairnessGoal(figures);
  log(`\n${fairnessText(figures)}\n\n${goal.met ? '✓' : '✗'} ${goal.name}: ${goal.measured} (goal ${goal.target})`);
  process.exit(figures.probeErrors + figures.floodErrors === 0 ? 0 : 1);
}

log(`Vigil bench (${quick ? 'quick' : 'full'}), load generator: ${loadTool() === 'wrk' ? `wrk with ${wrkThreads()} thread(s)` : 'autocannon'}`);
log('micro…');
const micro = await runMicro(quick);
log('macro…');
const macro = await runMacro(quick ? { rounds: 1, seconds: 3, warmupSeconds: 1, connections: 64, log } : { rounds: 3, seconds: 8, warmupSeconds: 1, connections: 64, log });
log('stream…');
const streamed = await runStream(quick ? { rounds: 1, seconds: 3, warmupSeconds: 1, connections: 64, log } : { rounds: 3, seconds: 6, warmupSeconds: 1, connections: 64, log });
log('many tenants…');
const tenants = await runTenants(tenantTiming, tenantOrgs);
log('fairness…');
const fairness = await runFairness(fairnessTiming);
log('scale-out…');
const scaleOut = await runScaleOut(scaleOutTiming);
log('cluster…');
const cluster = await runCluster(quick ? { rounds: 1, seconds: 3, warmupSeconds: 1, connections: 64, log } : { rounds: 3, seconds: 8, warmupSeconds: 1, connections: 64, log });
const records = quick ? 200_000 : 1_000_000;
log(`ledger with ${records.toLocaleString('en-US')} records and 10,000 agents…`);
const ledger = await runLedger(records, 10_000, quick ? { rounds: 1, seconds: 3 } : { rounds: 3, seconds: 5 }, log);

const row = (scenario: string, target: string): MacroRow | undefined => macro.find((r) => r.scenario.startsWith(scenario) && r.target === target);
const ratio = (scenario: string, target: string, against: string, goal?: number): Ratio | undefined => {
  const a = row(scenario, target);
  const b = row(scenario, against);
  if (a === undefined || b === undefined || b.rps === 0) return undefined;
  // The median of the rounds' ratios (each round measures both within a minute of each other):
  // one round in which the machine was busy for one of them does not move it.
  const perRound = a.rounds !== undefined && b.rounds !== undefined && a.rounds.length === b.rounds.length ? a.rounds.map((x, i) => x / b.rounds![i]!) : [a.rps / b.rps];
  return { scenario: `${scenario} ${target}`, against, ratio: Math.round(median(perRound) * 100) / 100, rounds: perRound.map((x) => Math.round(x * 100) / 100), ...(goal === undefined ? {} : { goal }) };
};
const ratios = [
  ratio('POST', 'vigil (sync)', 'fastify', 1),
  ratio('POST', 'vigil (sync)', 'uws'),
  ratio('POST', 'vigil (process)', 'fastify'),
  ratio('POST', 'vigil (sync)', 'vigil (sync, no log)', 0.95),
  ratio('GET', 'vigil', 'fastify', 2),
  ratio('GET', 'vigil', 'uws'),
].filter((r): r is Ratio => r !== undefined);

const ingest = row('POST', 'vigil (sync)');
const stream = { ...streamed, perRequestRps: ingest?.rps ?? NaN };
const per = (against: number | null): number => (against === null || !(against > 0) ? NaN : Math.round((stream.eventsPerSec / against) * 100) / 100);
const reads = row('GET', 'vigil');
const r = (scenario: string, target: string, against: string): number => ratio(scenario, target, against)?.ratio ?? NaN;
const scale = quick ? ` (quick: ${records.toLocaleString('en-US')} records)` : '';
const goals: BenchReport['goals'] = [
  { name: 'durable ingest vs Fastify', target: '≥ 1.0×', measured: `${r('POST', 'vigil (sync)', 'fastify')}×`, met: r('POST', 'vigil (sync)', 'fastify') >= 1 },
  {
    name: 'durable ingest with the transparency log vs without (same run)',
    target: '≥ 0.95×',
    measured: `${r('POST', 'vigil (sync)', 'vigil (sync, no log)')}×`,
    met: r('POST', 'vigil (sync)', 'vigil (sync, no log)') >= 0.95,
  },
  { name: 'durable ingest p99', target: '≤ 20 ms', measured: `${ingest?.p99} ms`, met: (ingest?.p99 ?? Infinity) <= 20 },
  { name: 'durable ingest errors', target: '0', measured: String(ingest?.errors), met: ingest?.errors === 0 },
  { name: 'public reads vs Fastify', target: '≥ 2.0×', measured: `${r('GET', 'vigil', 'fastify')}×`, met: r('GET', 'vigil', 'fastify') >= 2 },
  { name: 'public reads p99', target: '≤ 5 ms', measured: `${reads?.p99} ms`, met: (reads?.p99 ?? Infinity) <= 5 },
  ...(cluster === null
    ? []
    : [{ name: 'cluster durable ingest vs embedded (same run)', target: '≥ 0.5×', measured: `${cluster.ratio}×`, met: cluster.ratio >= 0.5 }]),
  { name: 'streaming ingest vs per-request POST /events/', target: '≥ 4.0×', measured: `${per(stream.perRequestRps)}×`, met: per(stream.perRequestRps) >= 4 },
  { name: 'streaming ingest with the transparency log vs without (same run)', target: '≥ 0.95×', measured: `${stream.noLog.ratio}×`, met: stream.noLog.ratio >= 0.95 },
  ...(stream.jetstreamPerSec === null
    ? []
    : [{ name: 'streaming ingest vs JetStream R1 async publish', target: '≥ 1.0×', measured: `${per(stream.jetstreamPerSec)}×`, met: per(stream.jetstreamPerSec) >= 1 }]),
  { name: 'streaming ingest vs bare LMDB batched append', target: '≥ 0.5×', measured: `${per(stream.lmdbRowsPerSec)}×`, met: per(stream.lmdbRowsPerSec) >= 0.5 },
  { name: `${tenants.orgs} orgs vs one org, POST /events/ (same run)`, target: '≥ 0.9×', measured: `${tenants.httpRatio}×`, met: tenants.httpRatio >= 0.9 },
  { name: `${tenants.orgs} orgs vs one org, stream (same run)`, target: '≥ 0.9×', measured: `${tenants.streamRatio}×`, met: tenants.streamRatio >= 0.9 },
  fairnessGoal(fairness),
  ...scaleOutGoals(scaleOut),
  {
    name: `inclusion proofs of random records vs the public record route${scale}`,
    target: '≥ 0.5×',
    measured: `${ledger.proofs.ratio}× (${ledger.proofs.proofRps.toLocaleString('en-US')} vs ${ledger.proofs.publicRps.toLocaleString('en-US')} req/s)`,
    met: ledger.proofs.ratio >= 0.5,
  },
  { name: 'ledger verification', target: '≥ 300,000 records/s', measured: `${ledger.verifyRecordsPerSec.toLocaleString('en-US')} records/s`, met: ledger.verifyRecordsPerSec >= 300_000 },
  { name: `restart until ready, from checkpoints${scale}`, target: '≤ 10 s (1M records)', measured: `${(ledger.warmReadyMs / 1000).toFixed(2)} s`, met: ledger.warmReadyMs <= 10_000 },
  { name: `first start until ready, whole ledger${scale}`, target: '≤ 10 s (1M records)', measured: `${(ledger.coldReadyMs / 1000).toFixed(2)} s`, met: ledger.coldReadyMs <= 10_000 },
  { name: `RSS after loading${scale}`, target: '≤ 400 MB (1M records, 10k agents)', measured: `${Math.max(ledger.warmRssMb, ledger.coldRssMb)} MB`, met: Math.max(ledger.warmRssMb, ledger.coldRssMb) <= 400 },
];

const notes: string[] = [];
const bare = row('GET', 'uws');
if (loadTool() === 'autocannon' && bare !== undefined) {
  notes.push(
    `the load generator is autocannon, a Node.js process on the same cores: it drove the bare uWebSockets.js handler to only ${Math.round(bare.rps).toLocaleString('en-US')} req/s, ` +
      'its own ceiling here, so the ratios of fast targets are compressed toward 1. Install wrk (Debian: apt-get install wrk) for figures the goals can be read from.',
  );
}

const report: BenchReport = {
  createdAt: new Date().toISOString(),
  machine: { cpus: cpus().length, node: process.version, tool: loadTool() === 'wrk' ? `wrk, ${wrkThreads()} thread${wrkThreads() === 1 ? '' : 's'}` : 'autocannon' },
  quick,
  micro,
  macro,
  ratios,
  ledger: (({ proofs, ...figures }) => ({
    ...figures,
    proofsTreeReadySeconds: proofs.treeReadySeconds,
    proofsPublicRecordRps: proofs.publicRps,
    proofsInclusionRps: proofs.proofRps,
    proofsRatio: proofs.ratio,
    proofsRatioRounds: proofs.rounds.join(' / '),
    proofsInclusionP99Ms: proofs.proofP99,
    proofsErrors: proofs.errors,
  }))(ledger),
  ...(cluster === null ? {} : { cluster }),
  stream,
  tenants,
  fairness,
  scaleOut,
  goals,
  notes,
};
printReport(report);
const out = writeReport(report, fileURLToPath(new URL('./results', import.meta.url)));
log(`\nwrote ${out.json} and ${out.md} in ${Math.round((performance.now() - started) / 1000)} s`);
