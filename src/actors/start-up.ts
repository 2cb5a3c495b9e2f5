import type { Bus, CommittedHandler } from '../bus/bus.js';
import { bodyIsReadable } from '../domain/ledger.js';
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
import type { Logger } from '../log.js';

export interface StartUp {
  store: LmdbStore;
  bus: Bus;
  actors: OrgActors;
  projections: { directory: AgentDirectory; reviews: ReviewQueue; meter: UsageMeter; exports: ExportLog };
  deliveries: DeliveryActor;
  policy: Policy;
  policyDigest: string;
  log: Logger;
  /** Orgs replayed from their first row with at least this many rows are cut by agent across threads. */
  partitionedReplayFrom?: number | undefined;
  replay?: ReplayOptions | undefined;
}

/** The projections, by their checkpoint names (and their keys in StartUp.projections). */
const PROJECTIONS = ['directory', 'reviews', 'meter', 'exports'] as const;

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
  const restored = restoreCheckpoints(s.store, s.projections, s.actors, s.policyDigest);
  /** Per projection, per org, the seq it holds. */
  const held = new Map(PROJECTIONS.map((name) => [name, restored.projections.get(name)!]));
  const checkpointed = [restored.writer, ...held.values()];
  const rebuilt = await rebuildLargeOrgs(s, checkpointed);
  // The replay read the whole ledger: let LMDB's cached mappings of it go (see LmdbStore.reopen).
  if (rebuilt.size > 0) await s.store.reopen();
  // Checkpoints of an org rebuilt in full are not used (its state is replaced below).
  const checkpoints = checkpointed.reduce((n, m) => n + [...m.keys()].filter((org) => !rebuilt.has(org)).length, 0);
  const deliveriesHeld = new Map(s.deliveries.cursors());
  for (const [org, state] of rebuilt) {
    s.actors.restore(org, state.writer);
    restored.writer.set(org, state.writer.lastSeq);
    for (const name of PROJECTIONS) {
      s.projections[name].restore(org, state[name] as never);
      held.get(name)!.set(org, state[name].length);
    }
    if (s.deliveries.skipTo(org, state.writer.lastSeq)) deliveriesHeld.set(org, state.writer.lastSeq);
  }
  const consumers: [CommittedHandler, ReadonlyMap<string, number>][] = [
    ...PROJECTIONS.map((name): [CommittedHandler, ReadonlyMap<string, number>] => [s.projections[name].onCommitted, held.get(name)!]),
    [s.deliveries.onCommitted, deliveriesHeld],
    [s.actors.onReplay, restored.writer],
  ];
  let replaying = true;
  /** Orgs whose ledger has a row that cannot be read: the replay stops there, for every consumer. */
  const damaged = new Map<string, number>();
  await s.bus.subscribe(
    (org, committed) => {
      if (!replaying) {
        for (const name of PROJECTIONS) s.projections[name].onCommitted(org, committed);
        // Deliveries are stored before the writer answers the request that caused them.
        return s.deliveries.onCommitted(org, committed);
      }
      if (damaged.has(org)) return undefined;
      const readable = committed.findIndex((row) => !bodyIsReadable(row));
      const rows = readable === -1 ? committed : committed.slice(0, readable);
      if (readable !== -1) damaged.set(org, committed[readable]!.seq);
      // Each consumer takes only the rows past what it holds.
      for (const [consumer, seqs] of consumers) {
        const newer = newerThan(rows, seqs.get(org));
        if (newer.length > 0) void consumer(org, newer);
      }
      return undefined;
    },
    { after: replayAfter(s.store.orgs(), consumers.map(([, seqs]) => seqs)) },
  );
  replaying = false;
  for (const [org, seq] of damaged) s.actors.markDamaged(org, seq);
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
    s.log.warn({ error: String(error) }, 'partitioned replay failed; replaying in one pass');
    return new Map();
  }
}
