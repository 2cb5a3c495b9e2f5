import type { LedgerRow } from '../domain/ledger.js';

export type AppendOutcome = { ok: true } | { ok: false; reason: 'conflict' };

export interface AppendOptions {
  /**
   * Called once the batch is committed or refused (ordered and visible), which may be before it
   * is durable. A writer may start its next batch then, so commits run back to back while
   * earlier batches are still being flushed.
   */
  onCommitted?: (committed: boolean) => void;
}

/**
 * Append-only ledger table, keyed by [org, seq]. There is no update and no delete.
 * `append` writes a batch of one org's consecutive rows, conditional on the org's last seq being
 * `expectedLastSeq` at commit (a second or stale writer is refused, not merged; no gap can form),
 * and resolves once the rows are durable at the configured level. Appends may be pipelined: they
 * commit in the order issued, and when one is refused every later one of that org is too.
 */
export interface LedgerStore {
  append(org: string, rows: readonly LedgerRow[], expectedLastSeq: number, options?: AppendOptions): Promise<AppendOutcome>;
  /** The last row of an org, or undefined for an empty ledger. */
  last(org: string): LedgerRow | undefined;
  /** One row, or undefined. */
  get(org: string, seq: number): LedgerRow | undefined;
  /** Rows with fromSeq <= seq <= toSeq in order, read lazily (a million rows never sit in memory). */
  range(org: string, fromSeq: number, toSeq?: number): Iterable<LedgerRow>;
  /** Every org with at least one row. */
  orgs(): Iterable<string>;
}
