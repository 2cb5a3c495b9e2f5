import { leafInput, type LedgerRow } from '../domain/ledger.js';
import { leafHash } from '../domain/merkle.js';
import { StripedTree, type Stripe, type StripeReader } from '../domain/striped-tree.js';
import { ensureError } from '../errors.js';
import type { Logger } from '../log.js';
import type { MerkleStore } from '../store/merkle-store.js';

/**
 * Every org's Merkle tree (DESIGN §10), a projection of the ledger: fed each org's committed rows
 * in seq order, it appends their leaves (O(log n) a row, amortized one node hash) and stores the
 * stripes they fill, in order, off the request path. A stripe is readable from memory until it is
 * stored; a failed write is tried again with the next one, so storage stays a prefix and nothing
 * is lost meanwhile. On start, a tree resumes from what is stored and the start-up replay feeds
 * it the ledger's rows after `size(org)`.
 */
export class MerkleTrees {
  private readonly trees = new Map<string, StripedTree>();
  /** Filled stripes not yet stored, by `org\0level/index`, in the order they were filled. */
  private readonly unstored = new Map<string, { org: string; stripe: Stripe }>();
  private writing: Promise<void> = Promise.resolve();
  private scheduled = false;

  constructor(
    private readonly store: MerkleStore,
    private readonly log: Logger,
  ) {}

  /** The org's tree, resumed from storage the first time it is asked for. */
  tree(org: string): StripedTree {
    let tree = this.trees.get(org);
    if (tree === undefined) {
      const reader: StripeReader = { stripe: (level, index) => this.unstored.get(keyOf(org, level, index))?.stripe.bytes ?? this.store.stripe(org, level, index) };
      tree = StripedTree.resume(reader, 256 * this.store.storedStripes(org));
      this.trees.set(org, tree);
    }
    return tree;
  }

  /** Leaves the org's tree holds: the seq of the last row it took. */
  size(org: string): number {
    return this.tree(org).size;
  }

  /** Takes committed rows of one org, in seq order; rows it holds already are skipped. */
  readonly onCommitted = (org: string, rows: readonly LedgerRow[]): void => {
    const tree = this.tree(org);
    for (const row of rows) {
      if (row.seq <= tree.size) continue;
      if (row.seq !== tree.size + 1) throw new Error(`the Merkle tree of ${org} holds ${tree.size} leaves and was given seq ${row.seq}`);
      for (const stripe of tree.append(leafHash(leafInput(row)))) this.unstored.set(keyOf(org, stripe.level, stripe.index), { org, stripe });
    }
    if (this.unstored.size > 0 && !this.scheduled) {
      this.scheduled = true;
      this.writing = this.writing.then(() => this.storeUnstored());
    }
  };

  /** Resolves once every stripe filled so far is stored (or its write has failed and will be tried again). */
  settled(): Promise<void> {
    return this.writing;
  }

  private async storeUnstored(): Promise<void> {
    this.scheduled = false;
    const batch = [...this.unstored.entries()];
    try {
      await this.store.put(batch.map(([, s]) => s));
      for (const [key] of batch) this.unstored.delete(key);
    } catch (error) {
      this.log.error({ stripes: batch.length, error: ensureError(error).message }, 'storing Merkle tree stripes failed; they stay in memory and are tried again with the next');
    }
  }
}

const keyOf = (org: string, level: number, index: number): string => `${org}\u0000${level}/${index}`;
