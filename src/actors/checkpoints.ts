import type { LedgerStore } from '../store/ledger-store.js';
import type { SnapshotStore } from '../store/snapshot-store.js';
import type { AgentDirectory, DirectorySnapshot } from './agent-directory.js';
import type { OrgActors } from './org-actors.js';
import type { WriterSnapshot } from './org-ledger-actor.js';

const VERSION = 1;

/**
 * Start-up checkpoints. On a clean stop every org's writer and directory state is saved at its
 * committed seq; on start a checkpoint that still matches the ledger (same chain hash at its seq,
 * same policy) seeds both, and the replay continues after it. Anything else is ignored and the
 * state is rebuilt from the ledger alone, so a checkpoint can make start-up faster but never
 * wrong. Returns, per org, the seq the replay should start after.
 */
export function restoreCheckpoints(
  store: SnapshotStore & Pick<LedgerStore, 'get'>,
  directory: AgentDirectory,
  actors: OrgActors,
  policy: string,
): Map<string, number> {
  const after = new Map<string, number>();
  for (const org of store.snapshotOrgs()) {
    const snapshot = store.getSnapshot(org);
    if (snapshot === undefined || snapshot.version !== VERSION || snapshot.policy !== policy) continue;
    const row = store.get(org, snapshot.seq);
    if (row === undefined || !row.chainHash.equals(Buffer.from(snapshot.chain))) continue;
    const dir = snapshot.directory as DirectorySnapshot;
    const writer = snapshot.writer as WriterSnapshot;
    if (dir.length !== snapshot.seq || writer.lastSeq !== snapshot.seq) continue;
    directory.restore(org, dir);
    actors.restore(org, writer);
    after.set(org, snapshot.seq);
  }
  return after;
}

/** Saves a checkpoint of every idle org; call after the front end stopped taking requests. */
export async function saveCheckpoints(store: SnapshotStore, directory: AgentDirectory, actors: OrgActors, policy: string, now: Date): Promise<number> {
  let saved = 0;
  for (const [org, writer] of await actors.snapshots()) {
    const dir = directory.snapshot(org);
    if (dir === undefined || dir.length !== writer.lastSeq || writer.lastSeq === 0) continue;
    await store.putSnapshot(org, {
      version: VERSION,
      seq: writer.lastSeq,
      chain: writer.head,
      takenAt: now.toISOString(),
      policy,
      writer,
      directory: dir,
    });
    saved++;
  }
  return saved;
}
