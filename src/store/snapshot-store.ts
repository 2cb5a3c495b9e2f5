/**
 * Checkpoints of in-memory state, per org, taken at a committed seq. A checkpoint only saves
 * start-up time: it is checked against the ledger (the chain hash at its seq must match) and
 * ignored when it does not, in which case the state is rebuilt from the ledger itself.
 */
export interface Snapshot {
  version: number;
  seq: number;
  /** Chain hash of the ledger row at `seq`. */
  chain: Buffer;
  takenAt: string;
  /** Digest of the scoring policy the writer state was built with. */
  policy: string;
  /** The org writer's state (OrgLedgerActor) and the agent directory's, opaque here. */
  writer: unknown;
  directory: unknown;
}

export interface SnapshotStore {
  getSnapshot(org: string): Snapshot | undefined;
  putSnapshot(org: string, snapshot: Snapshot): Promise<void>;
  snapshotOrgs(): string[];
}
