import type { LedgerRow } from '../domain/ledger.js';

/**
 * Folds one org's committed rows into memory, in seq order; stores nothing, so it returns nothing
 * to wait for. Every projection (directory, review queue, usage meter, export log) is one.
 */
export type ProjectionHandler = (org: string, rows: readonly LedgerRow[]) => void;
