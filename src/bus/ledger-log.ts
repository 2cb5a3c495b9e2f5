import type { LedgerRow } from '../domain/ledger.js';

/**
 * An adapter's fence token for one org: what the next append of the org must present, returned by
 * the previous append (LMDB: the org's last seq; JetStream: the stream sequence of the org's
 * previous batch). 0 is the fence of an org with no rows, in every adapter.
 */
export type Fence = number;

export type AppendOutcome = { ok: true; fence: Fence } | { ok: false; reason: 'conflict' };

/**
 * A place in the whole log that a subscription starts from, opaque to consumers (LMDB: the seq
 * each org's replay starts after; JetStream: a stream sequence). Made by `positionAfter`.
 */
export interface Position {
  readonly adapter: string;
}

/** Rows of one org, consecutive, in seq order, with the fence an append right after them presents. */
export interface CommittedBatch {
  org: string;
  rows: readonly LedgerRow[];
  fence: Fence;
}

/**
 * Takes committed batches. It stores nothing the write path waits for: what must be durable before
 * a command is answered (webhook deliveries) is the writer's to store (OrgActorOptions.afterAppend).
 */
export type BatchHandler = (batch: CommittedBatch) => void;

export interface Subscription {
  unsubscribe(): void;
}

/** What a log adapter can do beyond the contract; the contract suite runs the matching cases. */
export type LedgerCapability =
  /**
   * An append may be made before the one before it resolved, presenting the fence `fenceAfter`
   * foretold (an adapter with this capability has `fenceAfter`): appends of one org commit in the order made, and when one is refused every later
   * one of that org is too (so no gap can form). Without it a writer waits for each append.
   */
  | 'pipelined-appends'
  /**
   * Subscribers in this process have taken a batch before its append resolves, so a reader
   * answered after the writer sees its own writes in every projection.
   */
  | 'local-delivery';

/**
 * The ledger log: the system of record, per org an append-only sequence of rows.
 *
 * - `append` writes a batch of one org's consecutive rows if `expected` is still the org's fence:
 *   a stale or second writer gets `conflict` and nothing is written. It resolves once the batch is
 *   durable (as the adapter defines it), with the fence the next append presents.
 * - `read` gives one org's committed rows from `fromSeq`, in order, in chunks.
 * - `subscribe` first delivers every batch committed after `from`, then live ones; per org,
 *   batches arrive in seq order, never before they are durable. During the replay a row the
 *   subscriber holds may come again, only in a batch that also holds rows after it (consumers skip
 *   the seqs they hold); a live batch comes exactly once. It resolves once the replay of what was
 *   committed has been delivered; a handler that throws is logged and the subscription goes on.
 */
export interface LedgerLog {
  readonly capabilities: readonly LedgerCapability[];
  append(org: string, rows: readonly LedgerRow[], expected: Fence): Promise<AppendOutcome>;
  /** With `pipelined-appends` only: the fence an append of `rows` returns when it succeeds. */
  fenceAfter?(rows: readonly LedgerRow[]): Fence;
  /**
   * Runs `run` and writes the appends it makes together, once it returns: one write for all of
   * them (LMDB: one transaction), each still checked against its own fence and resolving alone,
   * exactly as if made one after the other. Optional: without it each append is its own write.
   */
  together?(run: () => void): void;
  read(org: string, fromSeq: number): AsyncIterable<CommittedBatch>;
  /** The position from which a subscriber that holds, per org, rows up to the given seq misses nothing. */
  positionAfter(held: ReadonlyMap<string, number>): Position;
  subscribe(handler: BatchHandler, from: Position): Promise<Subscription>;
  close(): Promise<void>;
}
