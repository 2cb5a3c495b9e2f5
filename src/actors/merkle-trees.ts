import { rowLeafHash, type LedgerRow } from '../domain/ledger.js';
import { StripeCache } from '../domain/stripe-cache.js';
import { HELD_LEVEL, jsNodes, STRIPE_WIDTH, StripedTree, type Sha256Nodes, type StripeReader } from '../domain/striped-tree.js';
import { ensureError, VigilError } from '../errors.js';
import type { Logger } from '../log.js';
import type { LedgerReader } from '../store/ledger-reader.js';
import type { MerkleStore } from '../store/merkle-store.js';
import { StripeWriter } from './stripe-writer.js';

/** Rows a catch-up reads before it stores what they filled and yields to the event loop. */
const CATCH_UP_ROWS = 1024;

/**
 * Every org's Merkle tree (DESIGN §10), a projection of the ledger: fed each org's committed rows
 * in seq order, it appends their leaves (O(log n) a row, amortized one node hash) and stores the
 * stripes they fill, in order, off the request path. A stripe is readable from memory until it is
 * stored; a failed write is tried again with the next one, so storage stays a prefix and nothing
 * is lost meanwhile.
 *
 * A tree behind its ledger (on start, after what was stored; a data dir from before trees
 * existed; a batch it was not given) catches up in the background: it reads the rows it lacks
 * from the ledger in chunks, storing what they fill and yielding between chunks, so neither the
 * start nor the request path waits for it and memory stays bounded. Live rows of an org catching
 * up are left to the catch-up, which reads up to the ledger's last row before it ends.
 */
export class MerkleTrees {
  private readonly trees = new Map<string, StripedTree>();
  /** Filled stripes on their way to the store, readable meanwhile. */
  private readonly writer: StripeWriter;
  /** Orgs whose tree is catching up with the ledger, and each catch-up's end. */
  private readonly catching = new Map<string, Promise<void>>();
  /** Orgs whose last catch-up failed (tried again with their next commit). */
  private readonly broken = new Set<string>();
  /** Not fed at all (see switchOff): no tree can be trusted to be whole. */
  private off = false;

  /** Stripes of levels 0 to HELD_LEVEL − 1, for proofs (see StripeCache). */
  private readonly cache: StripeCache;
  /** The native batch hasher's, else node:crypto's. */
  private readonly hashNodes: Sha256Nodes;
  /** How long live rows' stripes wait to be stored with later ones (see StripeWriter). */
  private readonly storeDelayMs: number;

  constructor(
    private readonly store: MerkleStore,
    private readonly ledger: LedgerReader,
    private readonly log: Logger,
    options: { cacheBytes?: number; sha256Nodes?: Sha256Nodes | null; storeDelayMs?: number } = {},
  ) {
    this.cache = new StripeCache(options.cacheBytes ?? DEFAULT_CACHE_BYTES);
    this.hashNodes = options.sha256Nodes ?? jsNodes;
    this.storeDelayMs = options.storeDelayMs ?? STORE_DELAY_MS;
    this.writer = new StripeWriter(store, log);
  }

  /**
   * The org's tree, resumed from storage the first time it is asked for. Stored stripes it cannot
   * resume from (missing or short), or that are not this ledger's (see notOfLedger), are dropped
   * and the tree rebuilt from the ledger.
   */
  tree(org: string): StripedTree {
    const held = this.trees.get(org);
    if (held !== undefined) return held;
    let tree: StripedTree;
    let why: string | null;
    try {
      tree = StripedTree.resume(this.readerOf(org), 256 * this.store.storedStripes(org));
      why = this.notOfLedger(org, tree);
    } catch (error) {
      return this.rebuild(org, ensureError(error).message);
    }
    if (why !== null) return this.rebuild(org, why);
    this.trees.set(org, tree);
    return tree;
  }

  /**
   * Why stored stripes resumed are not a tree of the org's ledger, or null. The trees are kept
   * apart from the ledger (their own environment), so the two can part: a ledger restored from a
   * backup beside newer stripes, or another data dir's stripes copied in. Stripes of more leaves
   * than the ledger has rows, or whose last leaf is not the hash of the ledger's row at that seq,
   * would sign roots of records the ledger does not hold.
   */
  private notOfLedger(org: string, tree: StripedTree): string | null {
    if (tree.size === 0) return null;
    const row = this.ledger.get(org, tree.size);
    if (row === undefined) return `the stored tree holds ${tree.size} leaves, the ledger ${this.ledger.last(org)?.seq ?? 0} rows`;
    // Read from storage, past the stripe cache (a leaf stripe there would take a proof's room).
    const leaf = this.store.hash(org, 0, tree.size / STRIPE_WIDTH - 1, STRIPE_WIDTH - 1);
    if (leaf === undefined) return `stripe 0/${tree.size / STRIPE_WIDTH - 1} is missing from storage or short`;
    if (!rowLeafHash(row).equals(leaf)) return `the stored tree's leaf ${tree.size} is not the hash of the ledger's record ${tree.size}`;
    return null;
  }

  /** Reads the org's stripes: filled and not yet stored, cached, or stored. A stored stripe found missing or short starts a rebuild. */
  private readerOf(org: string): StripeReader {
    const stored = <T>(found: T | undefined, level: number, index: number): T | undefined => {
      if (found === undefined && this.trees.has(org)) this.rebuild(org, `stripe ${level}/${index} is missing from storage or short`);
      return found;
    };
    const cached = this.cache.of(org);
    return {
      stripe: (level, index) => this.writer.held(org, level, index) ?? stored(whole(this.store.stripe(org, level, index)), level, index),
      holding: (level, index, slot) => {
        const unstored = this.writer.held(org, level, index);
        if (unstored !== undefined) return unstored;
        const hit = cached[level]?.[index];
        if (hit !== undefined) return hit;
        // A leaf stripe is kept only while the cache has room: past it, leaves read on demand would
        // push out stripes of levels 1–3, each of which serves two to eight times as many leaves.
        // Otherwise (or with no room for any stripe), the one hash: a pair copied out of LMDB.
        if (level === 0 ? !this.cache.hasRoom(STRIPE_BYTES) : this.cache.maxBytes < STRIPE_BYTES) return stored(this.store.hash(org, level, index, slot), level, index);
        return stored(this.readIntoCache(org, level, index), level, index);
      },
    };
  }

  /**
   * Drops the org's stored stripes (with the next write, before any new ones) and rebuilds its
   * tree from the ledger in the background; its routes answer 503 meanwhile. The tree is derived
   * from the ledger, so nothing is lost.
   */
  private rebuild(org: string, why: string): StripedTree {
    this.log.error({ org, error: why }, 'the Merkle tree\'s stored stripes are damaged: they are dropped and the tree rebuilt from the ledger');
    this.writer.forget(org);
    this.cache.drop(org);
    const tree = StripedTree.empty(this.readerOf(org));
    this.trees.set(org, tree);
    this.catchUp(org);
    return tree;
  }

  /**
   * What `read` reads from the org's tree. A stored stripe it finds damaged starts a rebuild (see
   * rebuild); the read then fails with a 503 to ask again, not with the storage error.
   */
  reading<T>(org: string, read: () => T): T {
    try {
      return read();
    } catch (error) {
      if (this.catchingUp(org)) throw new VigilError('unavailable', `the transparency log of ${org} is being rebuilt from its ledger; ask again in a moment`, undefined, { retryAfterSeconds: 1 });
      throw error;
    }
  }

  /** Orgs whose tree has been asked for or fed since start. */
  orgs(): IterableIterator<string> {
    return this.trees.keys();
  }

  /** Leaves the org's tree holds: the seq of the last row it took. */
  size(org: string): number {
    return this.tree(org).size;
  }

  /**
   * Takes committed rows of one org, in seq order; rows it holds already are skipped, and rows past
   * a gap start a catch-up. Never throws (it runs in the ledger's subscription): a failure is logged
   * and the next commit's catch-up mends it.
   */
  readonly onCommitted = (org: string, rows: readonly LedgerRow[]): void => {
    if (this.catching.has(org)) return;
    if (this.broken.has(org)) {
      this.catchUp(org);
      return;
    }
    try {
      const tree = this.tree(org);
      const first = rows.findIndex((row) => row.seq > tree.size);
      if (first === -1) return;
      if (rows[first]!.seq !== tree.size + 1) this.catchUp(org);
      else this.append(org, rows.slice(first));
    } catch (error) {
      this.log.error({ org, err: ensureError(error) }, 'the Merkle tree could not take committed rows; it catches up from the ledger');
      this.catchUp(org);
    }
  };

  /**
   * Whether the org's tree cannot be trusted to be whole now: reading rows it lacks from the
   * ledger (its size may be below what it held before a restart), or its last catch-up failed.
   */
  catchingUp(org: string): boolean {
    return this.off || this.catching.has(org) || this.broken.has(org);
  }

  /**
   * Whether the org's tree can be trusted and holds the ledger's rows through `seq`. A tree behind
   * rows the ledger holds and not catching up (a node not fed the org live: its copy was pulled on
   * demand) starts catching up from them, so that asking again soon finds it whole.
   */
  holds(org: string, seq: number): boolean {
    if (this.catchingUp(org)) return false;
    const size = this.size(org);
    if (size >= seq) return true;
    if ((this.ledger.last(org)?.seq ?? 0) > size) this.catchUp(org);
    return false;
  }

  /**
   * For the bench's A/B of the write path without trees only: the trees are not fed, and every
   * org's counts as catching up for good (its routes answer 503, no checkpoint is signed).
   */
  switchOff(): void {
    this.off = true;
  }

  /** Starts a catch-up of every org whose tree is behind its ledger; resolves when all have caught up. */
  catchUpAll(): Promise<void> {
    for (const org of this.ledger.orgs()) {
      if (this.size(org) < (this.ledger.last(org)?.seq ?? 0)) this.catchUp(org);
    }
    return Promise.all(this.catching.values()).then(() => undefined);
  }

  private catchUp(org: string): void {
    if (this.catching.has(org)) return;
    let finish!: () => void;
    this.catching.set(org, new Promise((resolve) => (finish = resolve)));
    void (async () => {
      try {
        for (;;) {
          const tree = this.tree(org);
          const last = this.ledger.last(org)?.seq ?? 0;
          if (tree.size >= last) {
            this.broken.delete(org);
            return;
          }
          const rows = [...this.ledger.range(org, tree.size + 1, Math.min(last, tree.size + CATCH_UP_ROWS))];
          if (rows.length === 0) throw new Error(`the ledger has no row ${tree.size + 1} although its last is ${last}`);
          this.append(org, rows, 0);
          await this.writer.settled();
          await new Promise((resolve) => setImmediate(resolve));
        }
      } catch (error) {
        this.log.error({ org, err: ensureError(error) }, 'the Merkle tree could not catch up with the ledger; it tries again with the next commit');
        this.broken.add(org);
      } finally {
        this.catching.delete(org);
        finish();
      }
    })();
  }

  /** Appends the org's next rows; their stripes are stored after `storeDelayMs` (see StripeWriter). */
  private append(org: string, rows: readonly LedgerRow[], storeDelayMs = this.storeDelayMs): void {
    const tree = this.tree(org);
    rows.forEach((row, i) => {
      if (row.seq !== tree.size + 1 + i) throw new Error(`the Merkle tree of ${org} holds ${tree.size} leaves and was given seq ${row.seq} as its leaf ${tree.size + 1 + i}`);
    });
    const filled = tree.appendAll(rows.map(rowLeafHash), this.hashNodes);
    // Leaf stripes only once a proof reads them: an org ingesting fast would otherwise fill the
    // cache with leaves nobody asks about.
    for (const stripe of filled) if (stripe.level > 0 && stripe.level < HELD_LEVEL) this.cache.put(org, stripe.level, stripe.index, stripe.bytes);
    this.writer.add(org, filled, storeDelayMs);
  }

  /** Resolves once every stripe filled so far is stored (or its write has failed and will be tried again); a write waiting out its delay starts now. */
  settled(): Promise<void> {
    return this.writer.settled();
  }

  /** Stores what is filled and waits for it, writes after it without a delay: before the store closes. */
  close(): Promise<void> {
    return this.writer.close();
  }

  /** A stored stripe of levels 0 to HELD_LEVEL − 1 the cache lacks, read into it. */
  private readIntoCache(org: string, level: number, index: number): Buffer | undefined {
    const stripe = whole(this.store.stripe(org, level, index));
    if (stripe !== undefined) this.cache.put(org, level, index, stripe);
    return stripe;
  }
}

/** How long live rows' filled stripes wait to be stored together by default (see StripeWriter). */
export const STORE_DELAY_MS = 250;

/** What the stripe cache holds at most by default (VIGIL_TREE_CACHE_MB): levels 0–3 of 2.2M records. */
export const DEFAULT_CACHE_BYTES = 128 * 1024 * 1024;

/** A stored stripe of the full 256 hashes, else undefined (a short one is damaged). */
const whole = (stripe: Buffer | undefined): Buffer | undefined => (stripe?.length === STRIPE_WIDTH * 32 ? stripe : undefined);

const STRIPE_BYTES = STRIPE_WIDTH * 32;
