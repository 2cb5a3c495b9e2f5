/**
 * Checkpoints of in-memory state, each taken by one consumer (an org's writer, a projection)
 * at a committed seq of one org. A checkpoint only saves start-up time: it is checked against the
 * ledger (the chain hash at its seq must match) and ignored when it does not, in which case the
 * state is rebuilt from the ledger itself.
 */
export interface Snapshot {
  version: number;
  /** Digest of the scoring policy in force when it was taken. */
  policy: string;
  seq: number;
  /** Chain hash of the ledger row at `seq`. */
  chain: Buffer;
  takenAt: string;
  state: unknown;
}

export interface SnapshotStore {
  /** `name` is the consumer's, e.g. `writer` or `directory`. */
  getSnapshot(name: string, org: string): Snapshot | undefined;
  putSnapshot(name: string, org: string, snapshot: Snapshot): Promise<void>;
  snapshotOrgs(name: string): string[];
}
