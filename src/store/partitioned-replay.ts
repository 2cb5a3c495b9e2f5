import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { Layout, LAYOUT_SLOTS } from '../domain/ledger-batch.js';
import type { LedgerRow } from '../domain/ledger.js';
import type { Policy } from '../domain/policy.js';
import { decodeRow, readLayout } from './row-codec.js';
import type { LmdbEnv } from './lmdb-env.js';
import type { LmdbLedger } from './lmdb-ledger.js';
import type { BulkReplay, OrgRebuild, ReplayJob } from '../actors/rebuild.js';
import { AgentDirectory, mergeDirectories } from '../actors/agent-directory.js';
import { ExportLog, mergeExportLogs } from '../actors/export-log.js';
import { mergeWriterSnapshots, OrgRecovery } from '../actors/org-recovery.js';
import { mergeReviewQueues, ReviewQueue } from '../actors/review-queue.js';
import { mergeMeters, UsageMeter } from '../actors/usage-meter.js';

/**
 * Start-up replay of large ledgers cut by agent across threads (embedded mode).
 *
 * Rebuilding an org's state from its first row is one pass over every row, and most of its cost
 * is per row (decoding, parsing the body, scoring). Every record but an export belongs to one
 * agent, and every consumer's state is a union of per-agent parts, so the rows can be dealt out
 * by agent: each part (this thread and N−1 workers) reads all rows as raw bytes, cheaply, but
 * decodes and folds only its own agents' (exports go to part 0), with the very consumers the live
 * path uses. The parts' states are then joined into what one replay would have built (tested
 * against it). Only orgs whose replay would start at their first row are replayed this way; the
 * ledger log's replay carries every row after the replayed tail, as usual.
 */

/** What a worker is given: one part of every job, read-only from the data dir. */
export interface PartJob {
  dir: string;
  jobs: ReplayJob[];
  part: number;
  parts: number;
  policy: Policy;
}

/** Read access a part needs: raw rows in order. */
export type RawLedger = Pick<LmdbLedger, 'scanRaw'>;

/** Rows decoded and folded at once (the ledger log's chunk size). */
const CHUNK = 1024;

/** How a partitioned replay runs; the defaults suit production, tests change them. */
export interface ReplayOptions {
  /** Threads, this one included (one per core, up to 4, by default). */
  parts?: number;
  /**
   * Workers get at least this long after this thread's part ends (10 s), or three times what that
   * part took if more; past it they are stopped and the replay fails (the caller falls back).
   */
  minWaitMs?: number;
  /** The worker module, relative to src/ (a test may name one that never answers). */
  workerModule?: string;
}

/** Below this many rows, threads cost more than they save. */
const PARTITIONED_REPLAY_FROM = 50_000;

/**
 * The bulk replay of embedded mode. Once it has read the whole ledger it reopens the environment,
 * which lets LMDB's cached mappings of it go (see LmdbEnv.reopen).
 */
export class PartitionedReplay implements BulkReplay {
  readonly from: number;

  constructor(
    private readonly env: LmdbEnv,
    private readonly ledger: LmdbLedger,
    private readonly options: ReplayOptions & { from?: number | undefined } = {},
  ) {
    this.from = options.from ?? PARTITIONED_REPLAY_FROM;
  }

  async replay(jobs: ReplayJob[], policy: Policy): Promise<Map<string, OrgRebuild>> {
    try {
      return await replayPartitioned(this.ledger, jobs, policy, this.options);
    } finally {
      await this.env.reopen();
    }
  }
}

/**
 * Replays the given orgs from the ledger, cut into parts by agent (this thread does part 0,
 * workers the others), and returns each org's rebuilt state as of its `to`.
 */
export async function replayPartitioned(store: LmdbLedger, jobs: ReplayJob[], policy: Policy, options: ReplayOptions = {}): Promise<Map<string, OrgRebuild>> {
  const parts = Math.max(1, Math.floor(options.parts ?? defaultParts()) || 1);
  const workers: PartWorker[] = [];
  let all: OrgRebuild[][];
  try {
    for (let part = 1; part < parts; part++) workers.push(startWorker({ dir: store.dir, jobs, part, parts, policy }, options.workerModule ?? WORKER_MODULE));
    const started = performance.now();
    const local = replayPart(store, jobs, 0, parts, policy);
    // The parts are of a size: a worker far behind this thread is stuck, not slow.
    const waitMs = Math.max(options.minWaitMs ?? 10_000, 3 * (performance.now() - started));
    all = [local, ...(await withDeadline(Promise.all(workers.map((w) => w.result)), waitMs))];
  } finally {
    // On failure the others stop too (their part is of no use); done ones are already exiting.
    for (const w of workers) void w.worker.terminate();
  }
  const out = new Map<string, OrgRebuild>();
  for (const [i, { org, to }] of jobs.entries()) {
    const tail = store.get(org, to);
    if (tail === undefined) throw new Error(`replay of ${org}: row ${to} is missing`);
    out.set(org, mergeParts(all.map((p) => p[i]!), tail));
  }
  return out;
}

/** One part: folds the rows of its agents for each job, in seq order. */
export function replayPart(store: RawLedger, jobs: readonly ReplayJob[], part: number, parts: number, policy: Policy): OrgRebuild[] {
  const layout = new Int32Array(LAYOUT_SLOTS);
  return jobs.map(({ org, to }) => {
    const directory = new AgentDirectory();
    const reviews = new ReviewQueue();
    const meter = new UsageMeter();
    const exports = new ExportLog();
    const writer = new OrgRecovery(policy);
    let chunk: LedgerRow[] = [];
    let scanned = 0;
    const fold = (): void => {
      directory.onCommitted(org, chunk);
      reviews.onCommitted(org, chunk);
      meter.onCommitted(org, chunk);
      exports.onCommitted(org, chunk);
      for (const row of chunk) writer.apply(row);
      chunk = [];
    };
    store.scanRaw(org, 1, to, (seq, bytes, size) => {
      scanned++;
      if (partOf(bytes, size, layout, parts) !== part) return;
      chunk.push(decodeRow(seq, bytes, size));
      if (chunk.length === CHUNK) fold();
    });
    if (chunk.length > 0) fold();
    // scanRaw numbers rows by position: all `to` of them present means no seq was skipped.
    if (scanned !== to) throw new Error(`replay of ${org}: ${to} rows expected, ${scanned} found`);
    return {
      writer: writer.snapshot(),
      directory: directory.snapshot(org) ?? { head: null, length: 0, agents: [] },
      reviews: reviews.snapshot(org) ?? { head: null, length: 0, open: [], decided: [], decidedSeqs: [] },
      meter: meter.snapshot(org) ?? { head: null, length: 0, months: [] },
      exports: exports.snapshot(org) ?? { head: null, length: 0, exports: [] },
    };
  });
}

/** Joins the parts of one org into the state a single replay up to `tail` builds. */
export function mergeParts(parts: readonly OrgRebuild[], tail: LedgerRow): OrgRebuild {
  const head = tail.chainHash.toString('hex');
  const each = <K extends keyof OrgRebuild>(key: K): OrgRebuild[K][] => parts.map((p) => p[key]);
  return {
    // LMDB's fence is the org's last seq.
    writer: mergeWriterSnapshots(each('writer'), { seq: tail.seq, fence: tail.seq, head: Buffer.from(tail.chainHash), ms: Date.parse(tail.recordedAt) }),
    directory: mergeDirectories(each('directory'), head, tail.seq),
    reviews: mergeReviewQueues(each('reviews'), head, tail.seq),
    meter: mergeMeters(each('meter'), head, tail.seq),
    exports: mergeExportLogs(each('exports'), head, tail.seq),
  };
}

/** The part a raw row belongs to: by FNV-1a of its agent id's bytes; rows without an agent go to part 0. */
function partOf(bytes: Buffer, size: number, layout: Int32Array, parts: number): number {
  readLayout(bytes, layout, size);
  const start = layout[Layout.AGENT]!;
  if (start < 0) return 0;
  const end = layout[Layout.AGENT_END]!;
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  return (h >>> 0) % parts;
}

function defaultParts(): number {
  return Math.max(1, Math.min(availableParallelism(), 4));
}

interface PartWorker {
  worker: Worker;
  result: Promise<OrgRebuild[]>;
}

const WORKER_MODULE = './store/replay-worker.ts';

/** Runs one part in a worker thread that exits when done. */
function startWorker(job: PartJob, module: string): PartWorker {
  const worker = new Worker(new URL('../ts-worker.mjs', import.meta.url), { workerData: { module, job } });
  const result = new Promise<OrgRebuild[]>((resolve, reject) => {
    let settled = false;
    worker.once('message', (message: { states?: OrgRebuild[]; error?: string }) => {
      settled = true;
      if (message.error !== undefined) reject(new Error(`replay worker: ${message.error}`));
      else resolve(message.states!);
    });
    worker.once('error', (error) => {
      settled = true;
      reject(error);
    });
    worker.once('exit', (code) => {
      if (!settled) reject(new Error(`replay worker exited with ${code}`));
    });
  });
  // A worker that fails while this thread still runs its own part must not go unhandled.
  result.catch(() => undefined);
  return { worker, result };
}

function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`replay workers did not finish within ${Math.round(ms)} ms of this thread's part`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
