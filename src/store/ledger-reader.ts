import type { LedgerRow } from '../domain/ledger.js';

/**
 * The ledger as this node's local copy holds it (embedded: the ledger itself; cluster: the replica
 * fed from the stream), read synchronously. Rows are only ever added, so what a read returns stays
 * true; a row committed while a range is read may or may not be in it.
 */
export interface LedgerReader {
  /** The last row of an org, or undefined for an empty ledger. */
  last(org: string): LedgerRow | undefined;
  /** One row, or undefined. */
  get(org: string, seq: number): LedgerRow | undefined;
  /** Rows with fromSeq <= seq <= toSeq in order, read lazily (a million rows never sit in memory). */
  range(org: string, fromSeq: number, toSeq?: number): Iterable<LedgerRow>;
  /** Every org with at least one row. */
  orgs(): Iterable<string>;
}
