import type { Stripe } from '../domain/striped-tree.js';

/**
 * Where each org's Merkle tree keeps its full stripes (DESIGN §10). The tree is derived from the
 * ledger, so what is stored only saves start-up work: a tree resumes from its stored stripes and
 * takes the ledger's later rows again. Stripes are stored in order, so storage holds a prefix of
 * every level; a write that fails leaves that prefix as it was.
 */
export interface MerkleStore {
  /** The stored stripe, or undefined. */
  stripe(org: string, level: number, index: number): Buffer | undefined;
  /** Hash `slot` of the stored stripe (a copy of its 32 bytes), or undefined. */
  hash(org: string, level: number, index: number, slot: number): Buffer | undefined;
  /** Full stripes of the org's level 0 stored: its stored tree has 256 × this many leaves. */
  storedStripes(org: string): number;
  /**
   * Stores stripes (of any orgs) in one write, after deleting every stored stripe of the orgs in
   * `drop` (a damaged tree being rebuilt); resolves once it is committed. It need not be synced to
   * disk: stripes are derived from the ledger, and an adapter that does not sync them must tell,
   * after a machine crash, that they may be torn (see openMerkleStore).
   */
  put(stripes: readonly { org: string; stripe: Stripe }[], drop?: readonly string[]): Promise<void>;
}
