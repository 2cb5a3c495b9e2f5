import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { ChainVerifier, GENESIS_HASH } from '../domain/ledger.js';
import { Layout, LAYOUT_SLOTS, RowBatch } from '../domain/ledger-batch.js';
import { nativeSha256Many } from './batch-hash.js';
import { readLayout } from './row-codec.js';
import type { LmdbLedger } from './lmdb-ledger.js';

export interface ChainCheck {
  ok: boolean;
  head: string | null;
  length: number;
  first_bad_seq: number | null;
  problem: string | null;
  agent_records: number;
  /** Seq at which the watched head appears (only trusted by the caller if no earlier row is bad). */
  watched_seq: number | null;
}

export interface SliceJob {
  dir: string;
  org: string;
  from: number;
  to: number;
  agentId: string | null;
  watchHead: Buffer | null;
}


const STEP = 20_000;

/** Below this many rows a worker costs more than it saves. */
const PARALLEL_FROM = 200_000;

/**
 * Verifies an org's chain from seq 1 to `length`. Large ledgers are cut into slices verified by
 * worker threads in parallel (hashing is the cost, and each slice only needs the chain hash just
 * before it); the slices' reports are merged in order. Small ones are verified inline.
 */
export async function verifyChain(
  store: LmdbLedger,
  org: string,
  length: number,
  agentId: string | null,
  watchHead: Buffer | null,
  parallelFrom = PARALLEL_FROM,
): Promise<ChainCheck> {
  const workers = Math.min(availableParallelism(), 4);
  if (length < parallelFrom || workers < 2) {
    return verifySlice(store, { dir: store.dir, org, from: 1, to: length, agentId, watchHead }, true);
  }
  const size = Math.ceil(length / workers);
  const jobs: SliceJob[] = [];
  for (let from = 1; from <= length; from += size) jobs.push({ dir: store.dir, org, from, to: Math.min(length, from + size - 1), agentId, watchHead });
  const parts = await Promise.all(jobs.map((job) => pool.run(job)));
  return merge(parts);
}

/** Verifies one slice; yields to the event loop now and then when run inline. */
export async function verifySlice(store: Pick<LmdbLedger, 'get' | 'range' | 'scanRaw'>, job: SliceJob, yieldOften = false): Promise<ChainCheck> {
  const start = job.from > 1 ? store.get(job.org, job.from - 1)?.chainHash : GENESIS_HASH;
  const verifier = new ChainVerifier({ startSeq: job.from - 1, startHash: start ?? Buffer.alloc(32), ...(job.watchHead === null ? {} : { watchHead: job.watchHead }) });
  let agentRecords = 0;
  let n = 0;
  if (nativeSha256Many !== null) {
    // Hash the stored bytes in batches, without decoding the rows.
    const batch = new RowBatch(nativeSha256Many, verifier);
    const layout = new Int32Array(LAYOUT_SLOTS);
    const agent = job.agentId === null ? null : Buffer.from(job.agentId);
    const visit = (seq: number, value: Buffer, size: number): void => {
      readLayout(value, layout, size);
      const a = layout[Layout.AGENT]!;
      if (agent !== null && a >= 0 && value.compare(agent, 0, agent.length, a, layout[Layout.AGENT_END]) === 0) agentRecords++;
      batch.add(seq, value, layout);
    };
    // In steps, so that an inline verification lets the event loop breathe between them.
    for (let from = job.from; from <= job.to; from += STEP) {
      store.scanRaw(job.org, from, Math.min(job.to, from + STEP - 1), visit);
      if (yieldOften) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    batch.flush();
  } else {
    for (const row of store.range(job.org, job.from, job.to)) {
      verifier.push(row);
      if (row.agentId === job.agentId) agentRecords++;
      if (yieldOften && ++n % 20_000 === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
  const report = verifier.report();
  const missing = report.length < job.to - job.from + 1;
  return {
    ok: report.ok && !missing,
    head: report.head,
    length: report.length,
    first_bad_seq: report.first_bad_seq ?? (missing ? job.from + report.length : null),
    problem: report.problem ?? (missing ? 'rows are missing' : null),
    agent_records: agentRecords,
    watched_seq: verifier.watchedSeq,
  };
}

function merge(parts: ChainCheck[]): ChainCheck {
  const bad = parts.find((p) => p.first_bad_seq !== null);
  return {
    ok: parts.every((p) => p.ok),
    head: parts.at(-1)?.head ?? null,
    length: parts.reduce((n, p) => n + p.length, 0),
    first_bad_seq: bad?.first_bad_seq ?? null,
    problem: bad?.problem ?? null,
    agent_records: parts.reduce((n, p) => n + p.agent_records, 0),
    watched_seq: parts.find((p) => p.watched_seq !== null)?.watched_seq ?? null,
  };
}

/**
 * Verification workers, started on the first large verification and kept for the next ones
 * (an idle one never holds the process open); each job goes to the least busy worker.
 */
class WorkerPool {
  private readonly workers: { worker: Worker; busy: number }[] = [];
  private readonly pending = new Map<number, { resolve: (c: ChainCheck) => void; reject: (e: Error) => void; worker: Worker }>();
  private nextId = 1;

  constructor(private readonly size: number) {}

  run(job: SliceJob): Promise<ChainCheck> {
    const slot = this.pick();
    const id = this.nextId++;
    if (slot.busy++ === 0) slot.worker.ref(); // a running job keeps the process alive
    return new Promise<ChainCheck>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, worker: slot.worker });
      slot.worker.postMessage({ id, job });
    }).finally(() => {
      if (--slot.busy === 0) slot.worker.unref();
    });
  }

  async close(): Promise<void> {
    const workers = this.workers.splice(0);
    await Promise.all(workers.map((w) => w.worker.terminate()));
  }

  private pick(): { worker: Worker; busy: number } {
    if (this.workers.length < this.size) {
      const worker = new Worker(new URL('../ts-worker.mjs', import.meta.url), { workerData: { module: './store/verify-chain-worker.ts' } });
      worker.on('message', ({ id, check, error }: { id: number; check?: ChainCheck; error?: string }) => {
        const waiting = this.pending.get(id);
        this.pending.delete(id);
        if (error !== undefined) waiting?.reject(new Error(error));
        else waiting?.resolve(check!);
      });
      worker.on('error', (error) => this.fail(worker, error));
      worker.on('exit', (code) => this.fail(worker, new Error(`verify worker exited with ${code}`)));
      worker.unref(); // an idle worker never holds the process open (after the listeners, which ref it)
      const slot = { worker, busy: 0 };
      this.workers.push(slot);
      return slot;
    }
    return this.workers.reduce((a, b) => (b.busy < a.busy ? b : a));
  }

  /** A dead worker fails its jobs and is replaced on the next run. */
  private fail(worker: Worker, error: Error): void {
    const i = this.workers.findIndex((w) => w.worker === worker);
    if (i >= 0) this.workers.splice(i, 1);
    for (const [id, waiting] of this.pending) {
      if (waiting.worker !== worker) continue;
      this.pending.delete(id);
      waiting.reject(error);
    }
  }
}

const pool = new WorkerPool(Math.min(availableParallelism(), 4));

/** Stops the verification workers (on shutdown). */
export function closeVerifyWorkers(): Promise<void> {
  return pool.close();
}
