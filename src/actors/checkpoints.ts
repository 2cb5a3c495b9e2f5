import type { LedgerRow } from '../domain/ledger.js';
import type { LedgerStore } from '../store/ledger-store.js';
import type { SnapshotStore } from '../store/snapshot-store.js';
import type { AgentDirectory, DirectorySnapshot } from './agent-directory.js';
import type { OrgActors } from './org-actors.js';
import type { WriterSnapshot } from './org-recovery.js';

const VERSION = 2;
const WRITER = 'writer';
const DIRECTORY = 'directory';

export interface Restored {
  /** Per org, the seq each consumer already holds; the replay must start after the smaller. */
  writer: Map<string, number>;
  directory: Map<string, number>;
  after: Map<string, number>;
}

/**
 * Start-up checkpoints. Each org's writer and agent directory save their state now and then and
 * on a clean stop; on start a checkpoint that still matches the ledger (same chain hash at its
 * seq, same policy) seeds its consumer, and the replay continues after it. Anything else is
 * ignored and that state is rebuilt from the ledger alone, so a checkpoint can make start-up
 * faster but never wrong.
 */
export function restoreCheckpoints(
  store: SnapshotStore & Pick<LedgerStore, 'get' | 'orgs'>,
  directory: AgentDirectory,
  actors: OrgActors,
  policy: string,
): Restored {
  const restored: Restored = { writer: new Map(), directory: new Map(), after: new Map() };
  const valid = (name: string, org: string) => {
    const snapshot = store.getSnapshot(name, org);
    if (snapshot === undefined || snapshot.version !== VERSION || snapshot.policy !== policy) return undefined;
    const row = store.get(org, snapshot.seq);
    return row !== undefined && row.chainHash.equals(Buffer.from(snapshot.chain)) ? snapshot : undefined;
  };
  for (const org of store.orgs()) {
    const writer = valid(WRITER, org);
    if (writer !== undefined) {
      actors.restore(org, writer.state as WriterSnapshot);
      restored.writer.set(org, writer.seq);
    }
    const dir = valid(DIRECTORY, org);
    if (dir !== undefined) {
      directory.restore(org, dir.state as DirectorySnapshot);
      restored.directory.set(org, dir.seq);
    }
    const after = Math.min(restored.writer.get(org) ?? 0, restored.directory.get(org) ?? 0);
    if (after > 0) restored.after.set(org, after);
  }
  return restored;
}

/** The rows of a replayed chunk that a consumer holding `seq` has not seen. */
export function newerThan(rows: readonly LedgerRow[], seq: number | undefined): readonly LedgerRow[] {
  if (seq === undefined || rows.length === 0 || rows[0]!.seq > seq) return rows;
  const i = rows.findIndex((r) => r.seq > seq);
  return i === -1 ? [] : rows.slice(i);
}

/**
 * Saves a checkpoint of every org that moved since `since` (org → seq last saved), for the
 * writer at its next fully committed moment and for the directory as it stands. Returns the
 * seqs saved, to pass back next time.
 */
export async function saveCheckpoints(
  store: SnapshotStore,
  directory: AgentDirectory,
  actors: OrgActors,
  policy: string,
  now: () => Date,
  since: Map<string, number> = new Map(),
  drain = false,
): Promise<Map<string, number>> {
  const saved = new Map(since);
  const put = async (name: string, org: string, seq: number, chain: Buffer, state: unknown): Promise<void> => {
    await store.putSnapshot(name, org, { version: VERSION, policy, seq, chain, takenAt: now().toISOString(), state });
  };
  for (const [org, writer] of await actors.snapshots(drain)) {
    if (writer.lastSeq === 0 || since.get(`${WRITER}:${org}`) === writer.lastSeq) continue;
    await put(WRITER, org, writer.lastSeq, writer.head, writer);
    saved.set(`${WRITER}:${org}`, writer.lastSeq);
  }
  for (const org of directory.orgNames()) {
    const dir = directory.snapshot(org);
    if (dir === undefined || dir.head === null || since.get(`${DIRECTORY}:${org}`) === dir.length) continue;
    await put(DIRECTORY, org, dir.length, Buffer.from(dir.head, 'hex'), dir);
    saved.set(`${DIRECTORY}:${org}`, dir.length);
  }
  return saved;
}
