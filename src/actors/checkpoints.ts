import type { LedgerRow } from '../domain/ledger.js';
import type { LedgerReader } from '../store/ledger-reader.js';
import type { SnapshotStore } from '../store/snapshot-store.js';
import type { OrgActors } from './org-actors.js';
import type { WriterSnapshot } from './org-recovery.js';

/** Bumped whenever a consumer's state changes shape: older checkpoints are then ignored. */
const VERSION = 6;
const WRITER = 'writer';

/** A projection whose per-org state can be saved and restored (the directory, the review queue). */
export interface Checkpointed {
  /** The org's state as plain data, with the ledger head (hex) and length it reflects. */
  snapshot(org: string): { head: string | null; length: number } | undefined;
  restore(org: string, snapshot: never): void;
  orgNames(): string[];
}

export interface Restored {
  /** Per org, the seq the writer already holds. */
  writer: Map<string, number>;
  /** Per projection name, per org, the seq it already holds. */
  projections: Map<string, Map<string, number>>;
}

/**
 * Start-up checkpoints. Each org's writer and each projection save their state now and then and
 * on a clean stop; on start a checkpoint that still matches the ledger (same chain hash at its
 * seq, same policy) seeds its consumer, and the replay continues after it. Anything else is
 * ignored and that state is rebuilt from the ledger alone, so a checkpoint can make start-up
 * faster but never wrong.
 */
export function restoreCheckpoints(
  store: SnapshotStore,
  ledger: Pick<LedgerReader, 'get' | 'orgs'>,
  projections: Readonly<Record<string, Checkpointed>>,
  actors: OrgActors,
  policy: string,
): Restored {
  const restored: Restored = { writer: new Map(), projections: new Map() };
  const valid = (name: string, org: string) => {
    const snapshot = store.getSnapshot(name, org);
    if (snapshot === undefined || snapshot.version !== VERSION || snapshot.policy !== policy) return undefined;
    const row = ledger.get(org, snapshot.seq);
    return row !== undefined && row.chainHash.equals(Buffer.from(snapshot.chain)) ? snapshot : undefined;
  };
  for (const name of Object.keys(projections)) restored.projections.set(name, new Map());
  for (const org of ledger.orgs()) {
    const writer = valid(WRITER, org);
    if (writer !== undefined) {
      actors.restore(org, writer.state as WriterSnapshot);
      restored.writer.set(org, writer.seq);
    }
    for (const [name, projection] of Object.entries(projections)) {
      const saved = valid(name, org);
      if (saved === undefined) continue;
      projection.restore(org, saved.state as never);
      restored.projections.get(name)!.set(org, saved.seq);
    }
  }
  return restored;
}

/** Per org, where the one replay must start: after the smallest seq every consumer holds. */
export function replayAfter(orgs: Iterable<string>, held: readonly ReadonlyMap<string, number>[]): Map<string, number> {
  const after = new Map<string, number>();
  for (const org of orgs) {
    const seq = Math.min(...held.map((m) => m.get(org) ?? 0));
    if (seq > 0) after.set(org, seq);
  }
  return after;
}

/** The rows of a replayed chunk that a consumer holding `seq` has not seen. */
export function newerThan(rows: readonly LedgerRow[], seq: number | undefined): readonly LedgerRow[] {
  if (seq === undefined || rows.length === 0 || rows[0]!.seq > seq) return rows;
  const i = rows.findIndex((r) => r.seq > seq);
  return i === -1 ? [] : rows.slice(i);
}

/**
 * Saves a checkpoint of every org that moved since `since` (consumer:org → seq last saved), for
 * the writer at its next fully committed moment and for each projection as it stands. Returns
 * the seqs saved, to pass back next time.
 */
export async function saveCheckpoints(
  store: SnapshotStore,
  projections: Readonly<Record<string, Checkpointed>>,
  actors: OrgActors,
  policy: string,
  now: () => Date,
  since: Map<string, number> = new Map(),
  drain = false,
): Promise<Map<string, number>> {
  const saved = new Map(since);
  // Issued together, the puts share the store's write batches: one flush, not one per consumer.
  const puts: Promise<void>[] = [];
  const put = (name: string, org: string, seq: number, chain: Buffer, state: unknown): void => {
    puts.push(store.putSnapshot(name, org, { version: VERSION, policy, seq, chain, takenAt: now().toISOString(), state }));
    saved.set(`${name}:${org}`, seq);
  };
  for (const [org, writer] of await actors.snapshots(drain)) {
    if (writer.lastSeq === 0 || since.get(`${WRITER}:${org}`) === writer.lastSeq) continue;
    put(WRITER, org, writer.lastSeq, writer.head, writer);
  }
  for (const [name, projection] of Object.entries(projections)) {
    for (const org of projection.orgNames()) {
      const state = projection.snapshot(org);
      if (state === undefined || state.head === null || since.get(`${name}:${org}`) === state.length) continue;
      put(name, org, state.length, Buffer.from(state.head, 'hex'), state);
    }
  }
  await Promise.all(puts);
  return saved;
}
