/**
 * Ledger at scale: writes N records for `agents` agents of one org straight into a temp data
 * dir (not timed), then measures chain verification (records/s), the start-up of a Vigil process
 * on that dir (until it listens, and until its first event is answered, which recovers the org
 * writer from the whole ledger), and that process's RSS.
 */
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GENESIS_HASH, makeRow, type LedgerRow } from '../src/domain/ledger.js';
import { closeVerifyWorkers, verifyChain } from '../src/store/verify-chain.js';
import { POLICY_V1, policyDigest } from '../src/domain/policy.js';
import { openLmdb } from '../src/store/lmdb.js';
import { Registry } from '../src/services/registry.js';
import { runLoad, type LoadResult } from './load.js';
import { median, profileFlags } from './macro.js';
import { rssMb, startProcess, VIGIL_READY } from './peers.js';

const ORG = 'bench';
export const LEDGER_KEY = 'vgl_bench-ledger-key-0123456789abcdefghijklmnop';

export interface LedgerFigures {
  records: number;
  agents: number;
  writeSeconds: number;
  /** First verification (starts the worker threads) and a later one (workers running). */
  verifyFirstRecordsPerSec: number;
  verifyRecordsPerSec: number;
  /** First start: no checkpoint, the whole ledger is replayed. */
  coldListenMs: number;
  coldReadyMs: number;
  coldRssMb: number;
  /** Restart after a clean stop: seeded from checkpoints. */
  warmListenMs: number;
  warmReadyMs: number;
  warmRssMb: number;
  dataMb: number;
  /** Inclusion proofs of random records against the public record route, on the same server (DESIGN §10). */
  proofs: ProofFigures;
}

export interface ProofFigures {
  /** Seconds from the server's start until its tree held the whole ledger (a background catch-up). */
  treeReadySeconds: number;
  publicRps: number;
  proofRps: number;
  /** Median of the rounds' ratios, proofs / public. */
  ratio: number;
  rounds: number[];
  proofP99: number;
  errors: number;
}

/** Starts Vigil on `dir`, times it until it listens and until a first event is answered, stops it. */
async function startVigil(dir: string): Promise<{ listenMs: number; readyMs: number; rssMb: number }> {
  const t0 = performance.now();
  const vigil = await startProcess('vigil', ['--import', 'tsx', 'src/main.ts', 'serve'], { VIGIL_PORT: '0', VIGIL_DATA_DIR: dir, VIGIL_DURABILITY: 'process' }, VIGIL_READY);
  const listenMs = Math.round(performance.now() - t0);
  try {
    const res = await fetch(`http://127.0.0.1:${vigil.port}/events/`, {
      method: 'POST',
      headers: { authorization: `Bearer ${LEDGER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: 'agent-0', event_type: 'output_generated', payload: {} }),
    });
    if (res.status !== 200) throw new Error(`first event answered ${res.status}: ${await res.text()}`);
    return { listenMs, readyMs: Math.round(performance.now() - t0), rssMb: rssMb(vigil.pid) };
  } finally {
    await vigil.stop();
  }
}

/**
 * Inclusion proofs (`GET /audit/proof/inclusion?seq=N`, 1,000 random seqs in turn) against the
 * public record route, round by round on one server over the whole ledger, once its tree holds
 * every record: both answer from memory and stored tiles, nothing is recomputed per request.
 */
export async function measureProofs(dir: string, records: number, load: { rounds: number; seconds: number }, log: (line: string) => void): Promise<ProofFigures> {
  const t0 = performance.now();
  const vigil = await startProcess(
    'vigil-proofs',
    [...profileFlags(), '--import', 'tsx', 'src/main.ts', 'serve'],
    { VIGIL_PORT: '0', VIGIL_DATA_DIR: dir, VIGIL_DURABILITY: 'process', VIGIL_PUBLIC_RATE_LIMIT: '1000000000' },
    VIGIL_READY,
  );
  try {
    const url = `http://127.0.0.1:${vigil.port}`;
    const headers = { authorization: `Bearer ${LEDGER_KEY}`, 'content-type': 'application/json' };
    const res = await fetch(`${url}/admin/agents/agent-0`, { method: 'PATCH', headers, body: JSON.stringify({ public: true }) });
    if (res.status !== 200) throw new Error(`making agent-0 public answered ${res.status}: ${await res.text()}`);
    // The tree catches up with the ledger in the background after a start; proofs wait for it.
    for (;;) {
      const checkpoint = await fetch(`${url}/audit/checkpoint`, { headers });
      if (checkpoint.status === 200 && Number((await checkpoint.text()).split('\n')[1]) >= records) break;
      if (performance.now() - t0 > 180_000) throw new Error('the tree did not catch up with the ledger within 180 s');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const treeReadySeconds = round((performance.now() - t0) / 1000, 1);
    const paths = Array.from({ length: 1000 }, () => `/audit/proof/inclusion?seq=${1 + Math.floor(Math.random() * records)}`);
    const specs = {
      public: { url: `${url}/public/agents/${ORG}/agent-0`, method: 'GET' as const, connections: 64, durationSec: load.seconds },
      proofs: { url: `${url}/audit/proof/inclusion`, method: 'GET' as const, headers: { authorization: headers.authorization }, paths, connections: 64, durationSec: load.seconds },
    };
    const results: Record<'public' | 'proofs', LoadResult[]> = { public: [], proofs: [] };
    for (const name of ['public', 'proofs'] as const) await runLoad({ ...specs[name], durationSec: 2 }); // warm-up
    for (let i = 1; i <= load.rounds; i++) {
      // Alternating the order, as the macro rounds do.
      for (const name of i % 2 === 1 ? (['public', 'proofs'] as const) : (['proofs', 'public'] as const)) {
        const result = await runLoad(specs[name]);
        results[name].push(result);
        log(`round ${i}/${load.rounds}  ${name === 'public' ? 'GET /public/agents/{org}/{agent}' : 'GET /audit/proof/inclusion (random)'} on ${records.toLocaleString('en-US')} records  ${Math.round(result.rps)} req/s  p99 ${result.p99} ms  errors ${result.errors}`);
      }
    }
    const rounds = results.proofs.map((r, i) => round(r.rps / results.public[i]!.rps, 2));
    const mean = (xs: LoadResult[]): number => Math.round(xs.reduce((sum, r) => sum + r.rps, 0) / xs.length);
    return {
      treeReadySeconds,
      publicRps: mean(results.public),
      proofRps: mean(results.proofs),
      ratio: median(rounds),
      rounds,
      proofP99: median(results.proofs.map((r) => r.p99)),
      errors: [...results.public, ...results.proofs].reduce((sum, r) => sum + r.errors, 0),
    };
  } finally {
    await vigil.stop();
  }
}

export async function fill(dir: string, records: number, agents: number): Promise<void> {
  const lmdb = openLmdb(dir, 'process');
  const store = lmdb.ledger;
  const registry = new Registry(lmdb.registry);
  await registry.ensureKey(ORG, LEDGER_KEY, 'bench');
  // A million events in one month is past the free plan's quota: this org is on the scale plan.
  await registry.setPlan(ORG, 'scale');
  const digest = policyDigest(POLICY_V1);
  let prev = GENESIS_HASH;
  let seq = 0;
  let eventId = 0;
  let batch: LedgerRow[] = [];
  const recordedAt = new Date().toISOString();
  const flush = async (): Promise<void> => {
    if (batch.length === 0) return;
    if (!(await store.commit(ORG, batch, batch[0]!.seq - 1))) throw new Error('bench fill: append refused');
    batch = [];
  };
  for (let i = 0; i < records; i++) {
    let row: LedgerRow;
    if (i < agents) {
      row = makeRow(prev, ++seq, 'agent', recordedAt, `agent-${i}`, { agent_id: `agent-${i}`, name: `Agent ${i}`, kind: 'production', observed: true });
    } else {
      const agent = `agent-${i % agents}`;
      eventId++;
      row = makeRow(prev, ++seq, 'event', recordedAt, agent, {
        event_id: eventId,
        action_id: eventId,
        event_type: 'output_generated',
        source: 'self',
        actor: null,
        dti: 0.1,
        payload: { content_length: 512 },
        gate_status: 'pass',
        bii: 0.9,
        composite_trust: 0.9,
        reason: 'clean output',
        requires_human_review: false,
        policy_digest: digest,
        observed: true,
      });
    }
    batch.push(row);
    prev = row.chainHash;
    if (batch.length === 2000) await flush();
  }
  await flush();
  await lmdb.close();
  // The filler does not fsync (durability `process`); without this, the first start measured next
  // would pay for flushing its ~650 MB of dirty pages, which no real start has to do.
  const file = openSync(join(dir, 'data.mdb'), 'r+');
  try {
    fsyncSync(file);
  } finally {
    closeSync(file);
  }
}

export async function runLedger(records: number, agents: number, load: { rounds: number; seconds: number }, log: (line: string) => void): Promise<LedgerFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'vigil-bench-ledger-'));
  try {
    const t0 = performance.now();
    await fill(dir, records, agents);
    const writeSeconds = (performance.now() - t0) / 1000;

    // Verification as the verify route runs it (worker threads on a large ledger): the first call
    // starts the workers, later ones (as in a running server) reuse them.
    const lmdb = openLmdb(dir, 'process');
    const store = lmdb.ledger;
    const rates: number[] = [];
    for (let i = 0; i < 2; i++) {
      const t1 = performance.now();
      const report = await verifyChain(store, ORG, records, 'agent-0', null);
      rates.push(Math.round(records / ((performance.now() - t1) / 1000)));
      if (!report.ok || report.length !== records) throw new Error(`bench ledger does not verify: ${JSON.stringify(report)}`);
    }
    await lmdb.close();
    // The workers hold the environment open (and its mappings): none of that is the server's.
    await closeVerifyWorkers();

    const cold = await startVigil(dir);
    // A clean stop saves checkpoints; the next start seeds from them (the usual restart).
    const warm = await startVigil(dir);
    const proofs = await measureProofs(dir, records, load, log);
    const { statSync } = await import('node:fs');
    return {
      records,
      agents,
      writeSeconds: round(writeSeconds, 1),
      verifyFirstRecordsPerSec: rates[0]!,
      verifyRecordsPerSec: rates[1]!,
      coldListenMs: cold.listenMs,
      coldReadyMs: cold.readyMs,
      coldRssMb: cold.rssMb,
      warmListenMs: warm.listenMs,
      warmReadyMs: warm.readyMs,
      warmRssMb: warm.rssMb,
      dataMb: round(statSync(join(dir, 'data.mdb')).size / 1024 / 1024, 1),
      proofs,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (x: number, d: number): number => Math.round(x * 10 ** d) / 10 ** d;
