import type { BatchHandler, CommittedBatch, LedgerLog } from '../bus/ledger-log.js';
import type { Policy } from '../domain/policy.js';
import { parseRecord } from '../domain/records.js';
import type { LedgerReader } from '../store/ledger-reader.js';
import type { SnapshotStore } from '../store/snapshot-store.js';
import type { AgentDirectory } from './agent-directory.js';
import { newerThan, replayAfter, restoreCheckpoints } from './checkpoints.js';
import type { DeliveryActor } from './delivery-actor.js';
import type { ExportLog } from './export-log.js';
import type { MerkleTrees } from './merkle-trees.js';
import type { OrgActors } from './org-actors.js';
import type { BulkReplay, OrgRebuild, ReplayJob } from './rebuild.js';
import type { ReviewQueue } from './review-queue.js';
import type { UsageMeter } from './usage-meter.js';
import type { Logger } from '../log.js';

export interface StartUp {
  /** The local copy of the ledger, read to plan the replay and check checkpoints. */
  reader: LedgerReader;
  ledger: LedgerLog;
  snapshots: SnapshotStore;
  actors: OrgActors;
  projections: { directory: AgentDirectory; reviews: ReviewQueue; meter: UsageMeter; exports: ExportLog };
  deliveries: DeliveryActor;
  /** Every org's Merkle tree (DESIGN §10): fed live rows; it catches up with the ledger on its own. */
  trees?: MerkleTrees | undefined;
  policy: Policy;
  policyDigest: string;
  log: Logger;
  /**
   * A faster rebuild of orgs that must be replayed from their first row (LMDB: cut by agent
   * across threads), for orgs with at least `from` rows; without it the one replay does all.
   */
  bulkReplay?: BulkReplay | undefined;
  /**
   * Whether deliveries not yet made are made from the replay (embedded mode). Cluster mode makes
   * them on the org's owner only, as its writer appends (OrgActorOptions.afterAppend) and as it
   * takes the org over (DeliveryOwnership).
   */
  replayDeliveries?: boolean;
}

/** The projections, by their checkpoint names (and their keys in StartUp.projections). */
const PROJECTIONS = ['directory', 'reviews', 'meter', 'exports'] as const;

/**
 * Rebuilds the org writers, the projections and the deliveries not yet made from the ledger, then
 * feeds them every committed row, live. Checkpoints seed what they still match; an org that must
 * be replayed from its first row and is large is rebuilt by the bulk replay; one subscription to
 * the ledger log replays the rest, each consumer taking only the rows past what it holds. Resolves once all of
 * it is rebuilt and the writers run; says how.
 */
export async function startConsumers(s: StartUp): Promise<{ ms: number; checkpoints: number; partitioned: number }> {
  const started = performance.now();
  const restored = restoreCheckpoints(s.snapshots, s.reader, s.projections, s.actors, s.policyDigest);
  /** Per projection, per org, the seq it holds. */
  const held = new Map(PROJECTIONS.map((name) => [name, restored.projections.get(name)!]));
  const checkpointed = [restored.writer, ...held.values()];
  const rebuilt = await rebuildLargeOrgs(s, checkpointed);
  // Checkpoints of an org rebuilt in full are not used (its state is replaced below).
  const checkpoints = checkpointed.reduce((n, m) => n + [...m.keys()].filter((org) => !rebuilt.has(org)).length, 0);
  const deliveriesHeld = new Map(s.deliveries.cursors());
  if (s.replayDeliveries === false) {
    for (const org of s.reader.orgs()) {
      const last = s.reader.last(org)?.seq ?? 0;
      s.deliveries.skipTo(org, last);
      deliveriesHeld.set(org, last);
    }
  }
  for (const [org, state] of rebuilt) {
    s.actors.restore(org, state.writer);
    restored.writer.set(org, state.writer.lastSeq);
    for (const name of PROJECTIONS) {
      s.projections[name].restore(org, state[name] as never);
      held.get(name)!.set(org, state[name].length);
    }
    if (s.deliveries.skipTo(org, state.writer.lastSeq)) deliveriesHeld.set(org, state.writer.lastSeq);
  }
  const consumers: [BatchHandler, ReadonlyMap<string, number>][] = [
    ...PROJECTIONS.map((name): [BatchHandler, ReadonlyMap<string, number>] => [({ org, rows }) => s.projections[name].onCommitted(org, rows), held.get(name)!]),
    // Deliveries are made from the delivery cursor here; live, the writer stores them (afterAppend).
    [({ org, rows }) => void s.deliveries.onCommitted(org, rows), deliveriesHeld],
    [s.actors.onReplay, restored.writer],
  ];
  let replaying = true;
  /** Orgs whose ledger has a row that cannot be read: the replay stops there, for every consumer. */
  const damaged = new Map<string, number>();
  await s.ledger.subscribe(
    (batch: CommittedBatch) => {
      const { org, rows: committed } = batch;
      if (!replaying) {
        for (const name of PROJECTIONS) s.projections[name].onCommitted(org, committed);
        s.trees?.onCommitted(org, committed);
        // Cluster mode: the owner also makes deliveries of rows its own writer did not append.
        if (s.replayDeliveries === false) s.deliveries.onReplicated(org, committed);
        return;
      }
      if (damaged.has(org)) return;
      const readable = committed.findIndex((row) => parseRecord(row) === null);
      const rows = readable === -1 ? committed : committed.slice(0, readable);
      if (readable !== -1) damaged.set(org, committed[readable]!.seq);
      // Each consumer takes only the rows past what it holds.
      for (const [consumer, seqs] of consumers) {
        const newer = newerThan(rows, seqs.get(org));
        if (newer.length > 0) consumer({ org, rows: newer, fence: batch.fence });
      }
    },
    s.ledger.positionAfter(replayAfter(s.reader.orgs(), consumers.map(([, seqs]) => seqs))),
  );
  replaying = false;
  for (const [org, seq] of damaged) s.actors.markDamaged(org, seq);
  s.actors.finishReplay();
  s.deliveries.start();
  return { ms: Math.round(performance.now() - started), checkpoints, partitioned: rebuilt.size };
}

/** Orgs whose replay would start from their first row (a first start, or checkpoints that no longer match) and that are large go to the bulk replay. */
async function rebuildLargeOrgs(s: StartUp, held: readonly ReadonlyMap<string, number>[]): Promise<Map<string, OrgRebuild>> {
  if (s.bulkReplay === undefined) return new Map();
  const jobs: ReplayJob[] = [];
  for (const org of s.reader.orgs()) {
    if (held.every((m) => m.has(org))) continue;
    const to = s.reader.last(org)?.seq ?? 0;
    if (to >= s.bulkReplay.from) jobs.push({ org, to });
  }
  if (jobs.length === 0) return new Map();
  try {
    return await s.bulkReplay.replay(jobs, s.policy);
  } catch (error) {
    // Only a shortcut: the one replay of the log rebuilds the same state, more slowly.
    s.log.warn({ err: error }, 'partitioned replay failed; replaying in one pass');
    return new Map();
  }
}
