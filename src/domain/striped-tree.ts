import { nodeHash, RangeHashes, type NodeSource } from './merkle.js';

/** sha256Nodes(pairs, out): out[32 i, +32) = SHA-256(0x01 ‖ pairs[64 i, +64)), the parent of pair i (RFC 9162 §2.1.1). */
export type Sha256Nodes = (pairs: Buffer, out: Buffer) => void;

/** Sha256Nodes with node:crypto, where the native batch hasher is not built. */
export function jsNodes(pairs: Buffer, out: Buffer): void {
  for (let i = 0; i * 64 < pairs.length; i++) out.set(nodeHash(pairs.subarray(i * 64, i * 64 + 32), pairs.subarray(i * 64 + 32, i * 64 + 64)), i * 32);
}

/** Hashes per stripe: one C2SP tile's width (c2sp.org/tlog-tiles). */
export const STRIPE_WIDTH = 256;
const HASH = 32;
/**
 * Stored stripes of this level and above are also held in memory once read or filled: a proof
 * then reads only its lowest levels from storage. They are 1/8 of the tree's nodes: 4 bytes a leaf
 * (4 MB for a million records).
 */
export const HELD_LEVEL = 4;

/** A full stripe: the 256 hashes of one level, [index·256, index·256 + 256), concatenated. */
export interface Stripe {
  level: number;
  index: number;
  bytes: Buffer;
}

/** Where full stripes are kept (an LMDB table, or a map in tests). */
export interface StripeReader {
  stripe(level: number, index: number): Buffer | undefined;
  /**
   * Hash `slot` (0–255) of the stored stripe: the whole stripe (256 × 32 bytes) when the reader
   * holds it in memory, else the hash's own 32 bytes (read from storage without copying the
   * stripe's 8 KB). Read it at nodeOffset.
   */
  holding(level: number, index: number, slot: number): Buffer | undefined;
}

/**
 * Where node `index` sits in `bytes` as StripedTree.nodeBytes gives it: 0 in its own 32 bytes,
 * slot · 32 in the stripe holding it (whole, or the first hashes of the one filling).
 */
export function nodeOffset(bytes: Buffer, index: number): number {
  return bytes.length === HASH ? 0 : (index % STRIPE_WIDTH) * HASH;
}

/**
 * One org's Merkle tree (DESIGN §10), every node of every level kept: full stripes of 256 hashes
 * in storage, and in memory only the stripe still filling on each level (at most 255 hashes a
 * level). A node is one read, so roots and proofs need no hashing beyond the right edge's.
 *
 * The stripes of level 8·t are exactly the C2SP tiles of level t, so full tiles are served as
 * stored. A leaf's append hashes one node per level it completes (amortized one) and hands back
 * the stripes it filled, lowest level first, to be stored together: what storage holds is then
 * always a prefix of every level, and the tree's stored size is 256 × the full stripes of level 0.
 */
export class StripedTree implements NodeSource {
  /**
   * Per level, the stripe still filling: its hashes so far, written in place (appends hash a
   * level's new nodes straight from the level below into it). It grows to the 8 KB of a full
   * stripe, which is handed over as it is when it fills; only the hashes below `filling` are set.
   */
  private readonly open: (Buffer | undefined)[] = [];
  /** Per level, how many hashes the stripe still filling holds. */
  private readonly filling: number[] = [];
  /** Per level, how many stripes are full (stored, or about to be). */
  private readonly full: number[] = [];
  /** Full stripes of levels from HELD_LEVEL up, by level and index, once read or filled. */
  private readonly held: Buffer[][] = [];
  /** Right-edge range hashes computed so far (see NodeSource.ranges). */
  readonly ranges = new RangeHashes();
  private leaves = 0;

  private constructor(private readonly store: StripeReader) {}

  /**
   * The tree of the first `size` leaves, given that storage holds the first `size / 256` stripes
   * of level 0 (`size` a multiple of 256) and, on each level above, every stripe that they fill.
   * The part-filled stripes above level 0 are recomputed from the levels below.
   */
  static resume(store: StripeReader, size: number): StripedTree {
    if (size % STRIPE_WIDTH !== 0) throw new RangeError(`a stored tree holds whole stripes; ${size} leaves do not`);
    const tree = new StripedTree(store);
    tree.leaves = size;
    for (let level = 0, count = size; count > 0; level++, count = Math.floor(count / 2)) {
      const fullStripes = Math.floor(count / STRIPE_WIDTH);
      tree.full[level] = fullStripes;
      tree.filling[level] = 0;
      for (let slot = 0; fullStripes * STRIPE_WIDTH + slot < count; slot++) {
        const i = fullStripes * STRIPE_WIDTH + slot;
        tree.room(level, 1).set(nodeHash(tree.node(level - 1, 2 * i), tree.node(level - 1, 2 * i + 1)), slot * HASH);
        tree.filling[level] = slot + 1;
      }
    }
    return tree;
  }

  static empty(store: StripeReader): StripedTree {
    return StripedTree.resume(store, 0);
  }

  get size(): number {
    return this.leaves;
  }

  /** Appends a leaf hash; returns the stripes it filled (to store, lowest level first). */
  append(leaf: Buffer): Stripe[] {
    return this.appendAll([leaf]);
  }

  /**
   * Appends leaf hashes in order; returns the stripes they filled, as append does. Each level's
   * new nodes are hashed in place, from the pairs below them (a pair never spans a stripe: stripes
   * are an even width) into the stripe filling above, a stripe's worth in one call of `hashNodes`
   * (the native batch hasher on the write path): no Buffer is made but the stripes themselves.
   * The same tree as appending them one at a time.
   */
  appendAll(leaves: readonly Buffer[], hashNodes: Sha256Nodes = jsNodes): Stripe[] {
    const filled: Stripe[] = [];
    if (leaves.length === 0) return filled;
    // Where this append's stripes of the level below start in `filled`, and that level's full count before it.
    let mark = 0;
    let fullBefore = this.full[0] ?? 0;
    this.fill(0, leaves.length, filled, (into, at, first, count) => {
      for (let i = 0; i < count; i++) into.set(leaves[first + i]!, at + i * HASH);
    });
    this.leaves += leaves.length;
    for (let level = 1; ; level++) {
      const from = this.count(level);
      const added = Math.floor(this.count(level - 1) / 2) - from;
      if (added === 0) break;
      // The new nodes' pairs were all completed by this append: they sit in the stripe filling
      // below or in stripes this append filled there.
      const [belowMark, belowFull] = [mark, fullBefore];
      [mark, fullBefore] = [filled.length, this.full[level] ?? 0];
      this.fill(level, added, filled, (into, at, first, count) => {
        const pair = 2 * (from + first);
        const stripe = Math.floor(pair / STRIPE_WIDTH);
        const pairs = stripe < this.full[level - 1]! ? filled[belowMark + stripe - belowFull]!.bytes : this.open[level - 1]!;
        const start = (pair % STRIPE_WIDTH) * HASH;
        hashNodes(pairs.subarray(start, start + count * 2 * HASH), into.subarray(at, at + count * HASH));
      });
    }
    return filled;
  }

  /** Nodes of `level` so far: full stripes and the one filling. */
  private count(level: number): number {
    return (this.full[level] ?? 0) * STRIPE_WIDTH + (this.filling[level] ?? 0);
  }

  /**
   * Adds `count` nodes to `level`, written by `write(into, at, first, count)` (nodes first …
   * first + count − 1 of those added, at byte `at` of the stripe filling), a run at most until the
   * stripe fills, or, above the leaves, until the pairs below cross into their next stripe.
   * Stripes it fills go to `filled`.
   */
  private fill(level: number, count: number, filled: Stripe[], write: (into: Buffer, at: number, first: number, count: number) => void): void {
    this.full[level] ??= 0;
    this.filling[level] ??= 0;
    for (let done = 0; done < count; ) {
      const slot: number = this.filling[level] ?? 0;
      let run = Math.min(STRIPE_WIDTH - slot, count - done);
      if (level > 0) run = Math.min(run, STRIPE_WIDTH / 2 - (slot % (STRIPE_WIDTH / 2)));
      write(this.room(level, run), slot * HASH, done, run);
      done += run;
      this.filling[level] = slot + run;
      if (slot + run < STRIPE_WIDTH) continue;
      const bytes = this.open[level]!;
      const index: number = this.full[level] ?? 0;
      if (level >= HELD_LEVEL) (this.held[level] ??= [])[index] = bytes;
      filled.push({ level, index, bytes });
      this.full[level] = index + 1;
      this.filling[level] = 0;
      // A level that filled a stripe fills the next one too: it starts at full size.
      this.open[level] = Buffer.alloc(STRIPE_WIDTH * HASH);
    }
  }

  /**
   * The stripe filling on `level`, with room for `more` hashes after those it holds: small at
   * first (most orgs' upper levels hold a few hashes), doubled as needed up to a full stripe.
   */
  private room(level: number, more: number): Buffer {
    const open = this.open[level];
    const need = ((this.filling[level] ?? 0) + more) * HASH;
    if (open !== undefined && open.length >= need) return open;
    let size = Math.max(open?.length ?? 0, 8 * HASH);
    while (size < need) size *= 2;
    const grown = Buffer.alloc(Math.min(size, STRIPE_WIDTH * HASH));
    open?.copy(grown, 0, 0, (this.filling[level] ?? 0) * HASH);
    this.open[level] = grown;
    return grown;
  }

  node(level: number, index: number): Buffer {
    const bytes = this.nodeBytes(level, index);
    if (bytes.length === HASH) return bytes;
    const at = nodeOffset(bytes, index);
    return bytes.subarray(at, at + HASH);
  }

  /**
   * Node (level, index) as the tree holds it, without a copy or a view made for it: its own 32
   * bytes, or the stripe holding it (stored, or the one filling; read it at nodeOffset). What a
   * proof written straight out (the proof route) reads.
   */
  nodeBytes(level: number, index: number): Buffer {
    if (level < 0) throw new RangeError('no level below the leaves');
    const stripe = Math.floor(index / STRIPE_WIDTH);
    const full = this.full[level] ?? 0;
    if (stripe < full) {
      if (level >= HELD_LEVEL) return this.stored(level, stripe);
      const bytes = this.store.holding(level, stripe, index % STRIPE_WIDTH);
      if (bytes === undefined || (bytes.length !== HASH && bytes.length !== STRIPE_WIDTH * HASH)) throw new Error(`stripe ${level}/${stripe} of the Merkle tree is missing from storage`);
      return bytes;
    }
    // The stripe filling, whole (its hashes below `filling` never change).
    if (stripe === full && index % STRIPE_WIDTH < (this.filling[level] ?? 0)) return this.open[level]!;
    throw new RangeError(`no complete node ${level}/${index} in a tree of ${this.leaves}`);
  }

  /**
   * The first `width` hashes (all 256 when null) of stripe `index` of `level`, concatenated: a
   * C2SP tile when level is a multiple of 8 (a partial one for a width below 256). Undefined
   * when the tree does not hold that many yet.
   */
  stripeBytes(level: number, index: number, width: number | null): Buffer | undefined {
    const want = width ?? STRIPE_WIDTH;
    if (!Number.isSafeInteger(index) || index < 0 || want < 1 || want > STRIPE_WIDTH) return undefined;
    const full = this.full[level] ?? 0;
    if (index < full) return this.stored(level, index).subarray(0, want * HASH);
    return index === full && (this.filling[level] ?? 0) >= want ? this.open[level]!.subarray(0, want * HASH) : undefined;
  }

  private stored(level: number, index: number): Buffer {
    const held = this.held[level]?.[index];
    if (held !== undefined) return held;
    const bytes = this.store.stripe(level, index);
    if (bytes === undefined || bytes.length !== STRIPE_WIDTH * HASH) throw new Error(`stripe ${level}/${index} of the Merkle tree is missing from storage`);
    if (level >= HELD_LEVEL) (this.held[level] ??= [])[index] = bytes;
    return bytes;
  }

  /** The hashes of the stripe still filling on `level` (a partial C2SP tile), oldest first. */
  partial(level: number): readonly Buffer[] {
    return Array.from({ length: this.filling[level] ?? 0 }, (_, i) => this.open[level]!.subarray(i * HASH, i * HASH + HASH));
  }
}
