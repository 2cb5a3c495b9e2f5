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
 * slot · 32 in the whole stripe of 256 hashes holding it.
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
  /** Per level, the hashes of the stripe still filling. */
  private readonly open: Buffer[][] = [];
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
      const row: Buffer[] = [];
      for (let i = fullStripes * STRIPE_WIDTH; i < count; i++) row.push(nodeHash(tree.node(level - 1, 2 * i), tree.node(level - 1, 2 * i + 1)));
      tree.open[level] = row;
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
   * Appends leaf hashes in order; returns the stripes they filled, as append does. The nodes they
   * complete are hashed level by level, each level's in one call of `hashNodes` (the native
   * batch hasher on the write path): the same tree as appending them one at a time.
   */
  appendAll(leaves: readonly Buffer[], hashNodes: Sha256Nodes = jsNodes): Stripe[] {
    const filled: Stripe[] = [];
    let nodes = leaves;
    for (let level = 0; nodes.length > 0; level++) {
      const row = (this.open[level] ??= []);
      this.full[level] ??= 0;
      // Each node at an odd index completes a pair with the one before it, in the same stripe
      // (stripes are an even width): pairs never span a stripe, so the left one is in the row.
      let index = this.full[level]! * STRIPE_WIDTH + row.length;
      const pairs = Buffer.allocUnsafe(Math.ceil(nodes.length / 2 + 1) * 2 * HASH);
      let count = 0;
      for (const node of nodes) {
        row.push(node);
        if (index % 2 === 1) {
          pairs.set(row[row.length - 2]!, count * 2 * HASH);
          pairs.set(node, count * 2 * HASH + HASH);
          count++;
        }
        if (row.length === STRIPE_WIDTH) {
          const bytes = Buffer.concat(row, STRIPE_WIDTH * HASH);
          if (level >= HELD_LEVEL) (this.held[level] ??= [])[this.full[level]!] = bytes;
          filled.push({ level, index: this.full[level]!, bytes });
          this.full[level]!++;
          row.length = 0;
        }
        index++;
      }
      // Not from Node's shared pool: the open rows keep views of it.
      const parents = Buffer.allocUnsafeSlow(count * HASH);
      if (count > 0) hashNodes(pairs.subarray(0, count * 2 * HASH), parents);
      nodes = Array.from({ length: count }, (_, i) => parents.subarray(i * HASH, i * HASH + HASH));
    }
    this.leaves += leaves.length;
    return filled;
  }

  node(level: number, index: number): Buffer {
    const bytes = this.nodeBytes(level, index);
    if (bytes.length === HASH) return bytes;
    const at = nodeOffset(bytes, index);
    return bytes.subarray(at, at + HASH);
  }

  /**
   * Node (level, index) as the tree holds it, without a copy or a view made for it: its own 32
   * bytes, or the whole stored stripe holding it (read it at nodeOffset). What a proof written
   * straight out (the proof route) reads.
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
    const found = stripe === full ? this.open[level]?.[index % STRIPE_WIDTH] : undefined;
    if (found === undefined) throw new RangeError(`no complete node ${level}/${index} in a tree of ${this.leaves}`);
    return found;
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
    const open = index === full ? (this.open[level] ?? []) : [];
    return open.length >= want ? Buffer.concat(open.slice(0, want), want * HASH) : undefined;
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
    return this.open[level] ?? [];
  }
}
