import type { Bus } from '../bus/bus.js';
import type { LedgerRow } from '../domain/ledger.js';
import type { Policy } from '../domain/policy.js';
import type { LmdbStore } from '../store/lmdb.js';
import type { AgentDirectory } from './agent-directory.js';
import { newerThan, replayAfter, restoreCheckpoints } from './checkpoints.js';
import type { DeliveryActor } from './delivery-actor.js';
import type { ExportLog } from './export-log.js';
import type { OrgActors } from './org-actors.js';
import { replayPartitioned, type OrgRebuild, type ReplayJob, type ReplayOptions } from './partitioned-replay.js';
import type { ReviewQueue } from './review-queue.js';
import type { UsageMeter } from './usage-meter.js';

export interface StartUp {
  store: LmdbStore;
  bus: Bus;
  actors: OrgActors;
  projections: { directory: AgentDirectory; reviews: ReviewQueue; meter: UsageMeter; exports: ExportLog };
  deliveries: DeliveryActor;
  policy: Policy;
  policyDigest: string;
  log: (level: 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => void;
  /** Orgs replayed from their first row with at least this many rows are cut by agent across threads. */
  partitionedReplayFrom?: number | undefined;
  replay?: ReplayOptions | undefined;
}

/** Below this many rows, threads cost more than they save. */
const PARTITIONED_REPLAY_FROM = 50_000;

/**
 * Rebuilds the org writers, the projections and the deliveries not yet made from the ledger, then
 * feeds them every committed row, live. Checkpoints seed what they still match; an org that must
 * be replayed from its first row and is large is rebuilt by agent across threads; one pass over the
 * bus replays the rest, each consumer taking only the rows past what it holds. Resolves once all of
 * it is rebuilt and the writers run; says how.
 */
export async function startConsumers(s: StartUp): Promise<{ ms: number; checkpoints: number; partitioned: number }> {
  const started = performance.now();
  const { directory, reviews, meter, exports } = s.projections;
  const restored = restoreCheckpoints(s.store, s.projections, s.actors, s.policyDigest);
  const held = {
    directory: restored.projections.get('directory')!,
    reviews: restored.projections.get('reviews')!,
    meter: restored.projections.get('meter')!,
    exports: restored.projections.get('exports')!,
    deliveries: new Map(s.deliveries.cursors()),
  };
  const checkpointed = [restored.writer, held.directory, held.reviews, held.meter, held.exports];
  const rebuilt = await rebuildLargeOrgs(s, checkpointed);
  // The replay read the whole ledger: let LMDB's cached mappings of it go (see LmdbStore.reopen).
  if (rebuilt.size > 0) await s.store.reopen();
  // Checkpoints of an org rebuilt in full are not used (its state is replaced below).
  const checkpoints = checkpointed.reduce((n, m) => n + [...m.keys()].filter((org) => !rebuilt.has(org)).length, 0);
  for (const [org, state] of rebuilt) {
    s.actors.restore(org, state.writer);
    restored.writer.set(org, state.writer.lastSeq);
    directory.restore(org, state.directory);
    held.directory.set(org, state.directory.length);
    reviews.restore(org, state.reviews);
    held.reviews.set(org, state.reviews.length);
    meter.restore(org, state.meter);
    held.meter.set(org, state.meter.length);
    exports.restore(org, state.exports);
    held.exports.set(org, state.exports.length);
    if (s.deliveries.skipTo(org, state.writer.lastSeq)) held.deliveries.set(org, state.writer.lastSeq);
  }
  let replaying = true;
  await s.bus.subscribe(
    (org, rows) => {
      if (!replaying) {
        directory.onCommitted(org, rows);
        reviews.onCommitted(org, rows);
        meter.onCommitted(org, rows);
        exports.onCommitted(org, rows);
        // Deliveries are stored before the writer answers the request that caused them.
        return s.deliveries.onCommitted(org, rows);
      }
      const feed = (consumer: (org: string, rows: readonly LedgerRow[]) => unknown, seq: number | undefined): void => {
        const newer = newerThan(rows, seq);
        if (newer.length > 0) consumer(org, newer);
      };
      feed(directory.onCommitted, held.directory.get(org));
      feed(reviews.onCommitted, held.reviews.get(org));
      feed(meter.onCommitted, held.meter.get(org));
      feed(exports.onCommitted, held.exports.get(org));
      feed(s.deliveries.onCommitted, held.deliveries.get(org));
      feed(s.actors.onReplay, restored.writer.get(org));
      return undefined;
    },
    { after: replayAfter(s.store.orgs(), [restored.writer, ...Object.values(held)]) },
  );
  replaying = false;
  s.actors.finishReplay();
  s.deliveries.start();
  return { ms: Math.round(performance.now() - started), checkpoints, partitioned: rebuilt.size };
}

/**
 * Orgs whose replay would start from their first row (a first start, or checkpoints that no longer
 * match) and whose ledger is large are rebuilt by agent across threads (partitioned-replay.ts).
 */
async function rebuildLargeOrgs(s: StartUp, held: readonly ReadonlyMap<string, number>[]): Promise<Map<string, OrgRebuild>> {
  const from = s.partitionedReplayFrom ?? PARTITIONED_REPLAY_FROM;
  const jobs: ReplayJob[] = [];
  for (const org of s.store.orgs()) {
    if (held.every((m) => m.has(org))) continue;
    const to = s.store.last(org)?.seq ?? 0;
    if (to >= from) jobs.push({ org, to });
  }
  if (jobs.length === 0) return new Map();
  try {
    return await replayPartitioned(s.store, jobs, s.policy, s.replay);
  } catch (error) {
    // Only a shortcut: the one replay on the bus rebuilds the same state, more slowly.
    s.log('warn', 'partitioned replay failed; replaying in one pass', { error: String(error) });
    return new Map();
  }
}
