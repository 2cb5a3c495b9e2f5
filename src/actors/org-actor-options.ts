import type { NotOwner } from '../bus/messages.js';
import type { KeyedEvent } from '../domain/idempotency.js';
import type { LedgerRow } from '../domain/ledger.js';
import type { Sha256Rows } from '../domain/ledger-batch.js';
import type { WriterLimits } from '../domain/org-state.js';
import type { Policy } from '../domain/policy.js';
import type { Logger } from '../log.js';
import type { WriterShare } from './writer-share.js';

/** How an org's writer is set up (the same for every org of a node). */
export interface OrgActorOptions {
  policy: Policy;
  policyDigest: string;
  /** Milliseconds since the epoch; injected so tests and replays control time. */
  now: () => number;
  /** The native batch hasher (store/batch-hash.ts), or null to hash with node:crypto. */
  sha256Rows?: Sha256Rows | null;
  /** Commands waiting beyond this are refused with `overloaded` (HTTP 429). */
  maxPending: number;
  /** Batches committed but not yet durable at once (group commit pipelining). */
  maxInflight?: number;
  /**
   * The most commands one batch takes (one append); a longer queue goes in several, with at most
   * twice this many commands in flight. No cap when absent.
   */
  maxBatch?: number;
  /**
   * The writers of this process that have work: while another org's has, this one keeps one batch
   * of `maxBatch` in flight rather than two (see WriterShare). Every writer alone when absent.
   */
  share?: WriterShare;
  /** Where the writer says what went wrong (failed appends, refused commands, damage). */
  log: Logger;
  /** The org's plan limits in force at `nowMs` (read once per batch). */
  limits?: (org: string, nowMs: number) => WriterLimits;
  /**
   * What must be stored because of a committed batch before its commands are answered (webhook
   * deliveries). Called once per appended batch, in seq order; the answers wait for its promise,
   * and a failure it reports is logged, not turned into a refusal: the rows are already durable.
   */
  afterAppend?: (org: string, rows: readonly LedgerRow[]) => Promise<unknown> | undefined;
  /**
   * How long the answers wait for `afterAppend` (ms; default: no bound). Past it the answers go,
   * with a warning, and what it stores lands later (cluster mode: a writer must not hang on a
   * stream that does not answer; a delivery not yet stored is made again by whoever owns the org
   * next, from the ledger rows past the stored cursor).
   */
  afterAppendMs?: number;
  /**
   * The answer to the commands of a batch the log refused by its fence (another writer appended
   * first); `unavailable` by default. Cluster mode answers `not_owner`, so the router routes them
   * again (nothing of them was written).
   */
  onConflict?: NotOwner;
  /**
   * Whether the writers are rebuilt from the start-up replay (embedded mode). Without it (cluster
   * mode: the replay is of the local replica, whose fences are not the stream's) a writer is
   * started from the log itself on its org's first command.
   */
  fromReplay?: boolean;
  /**
   * The event the org recorded with an idempotency key, from this node's store (its index is
   * written with the rows). Keys the writer decided lately are also held in memory (RecentKeys), so
   * batches in flight, and in cluster mode rows the local replica has not received yet, are found.
   */
  findKey?: (org: string, key: string) => KeyedEvent | undefined;
  /**
   * How many idempotency keys of durable rows each writer keeps in memory beside those not durable
   * yet (default 10,000): cluster mode's `findKey` reads a replica that trails the stream, so
   * recent keys must be held; embedded, the store's index holds a key once its row is durable (one
   * transaction), so none need be, and 10,000 per org held 100 orgs' million keys for the
   * collector to walk.
   */
  recentKeysKept?: number;
  /** Told of each durable batch: its records, and the seconds from leaving the queue to durable (GET /metrics). */
  committed?: ((records: number, seconds: number) => void) | undefined;
}
