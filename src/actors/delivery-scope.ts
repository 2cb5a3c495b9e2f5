import type { LedgerReader } from '../store/ledger-reader.js';

/**
 * Where delivery ids come from. Each id is unique across every writer of the webhook store, and
 * above every id of the org stored so far (ids increase per org, whoever made them).
 */
export interface DeliveryIds {
  /** The most ids one `take` hands out. */
  readonly maxTake: number;
  /** The first of `count` (1 … maxTake) consecutive ids for the org's new deliveries. */
  take(org: string, count: number): number | Promise<number>;
}

/**
 * Cluster mode (DESIGN §8): the org's owner, the node whose lease holds the org's partition, is
 * the one that makes, stores and sends its deliveries. Without a scope (embedded mode) this
 * process does all of them.
 */
export interface DeliveryScope {
  /** Whether this node holds the org's partition now. */
  owns(org: string): boolean;
  /**
   * Resolves once this node's copies of the ledger and of the webhook store hold the org's writes
   * acknowledged so far; rejects when they cannot tell (the actor tries again later).
   */
  caughtUp(org: string): Promise<void>;
  /** This node's copy of the ledger: a new owner turns the rows past the org's cursor into deliveries from it. */
  ledger: LedgerReader;
  ids: DeliveryIds;
}
