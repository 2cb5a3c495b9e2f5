import { createHash, hash } from 'node:crypto';

/**
 * RFC 9162 §2.1 Merkle trees over an org's ledger (DESIGN §10): leaf i is the record with seq
 * i+1, its input the JCS bytes its content_hash covers. Hashes are 32-byte Buffers.
 *
 * A tree is read through a NodeSource: the hashes of its complete subtrees (the "full nodes" that
 * C2SP tiles publish), which a tree stores as it grows. Every root, inclusion proof and
 * consistency proof for any size up to the tree's is built from O(log n) of them; nothing is
 * recomputed from the leaves.
 */

const LEAF_PREFIX = Buffer.from([0x00]);
const NODE_PREFIX = Buffer.from([0x01]);

/** MTH({}): the hash of an empty string. */
export const EMPTY_ROOT: Buffer = createHash('sha256').update(Buffer.alloc(0)).digest();

export function leafHash(input: Uint8Array): Buffer {
  return createHash('sha256').update(LEAF_PREFIX).update(input).digest();
}

/** 0x01 ‖ left ‖ right, reused: hashing is synchronous (one-shot `hash` of it is ~30% faster than three updates). */
const NODE_INPUT = Buffer.alloc(65, 0x01);

export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  if (left.length !== 32 || right.length !== 32) return createHash('sha256').update(NODE_PREFIX).update(left).update(right).digest();
  NODE_INPUT.set(left, 1);
  NODE_INPUT.set(right, 33);
  return hash('sha256', NODE_INPUT, 'buffer');
}

/**
 * The hashes of a tree's complete subtrees: `node(level, index)` covers leaves
 * [index·2^level, (index+1)·2^level), level 0 being the leaf hashes. Only nodes wholly inside
 * the tree are asked for.
 */
export interface NodeSource {
  readonly size: number;
  node(level: number, index: number): Buffer;
  /**
   * Where the hashes of ranges that are not complete subtrees (the right edge's) may be kept once
   * computed: a range of leaves never changes once the tree holds it, and every proof at one tree
   * size hashes the same few. Optional; kept bounded by the caller of rangeHash.
   */
  readonly ranges?: RangeHashes;
}

/**
 * The most right-edge range hashes a tree keeps: a tree size needs at most ~log n of them, so this
 * holds the current size's and a few before (≈ 25 KB a tree); past it they start over.
 */
const MAX_RANGES = 256;

/** Range hashes by the range's end, then its start: numbers, so a lookup builds no key string. */
export class RangeHashes {
  private readonly byEnd = new Map<number, Map<number, Buffer>>();
  private count = 0;

  get(start: number, end: number): Buffer | undefined {
    return this.byEnd.get(end)?.get(start);
  }

  set(start: number, end: number, hash: Buffer): void {
    if (this.count >= MAX_RANGES) {
      this.byEnd.clear();
      this.count = 0;
    }
    let starts = this.byEnd.get(end);
    if (starts === undefined) this.byEnd.set(end, (starts = new Map<number, Buffer>()));
    if (!starts.has(start)) this.count++;
    starts.set(start, hash);
  }
}

/** The largest power of two smaller than n (n ≥ 2): where RFC 9162 splits a tree of n leaves. */
export function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** Whether n is 2^k for some k ≥ 0, for any safe integer (a 32-bit mask stops at 2^31; Math.log2 alone rounds 2^k ± 1 to k past 2^49). */
export function isPowerOfTwo(n: number): boolean {
  // The mask for 32-bit sizes (every proof of a ledger below 2^31 records: the hot path).
  if (n >= 1 && n <= 0x7fffffff && Number.isInteger(n)) return (n & (n - 1)) === 0;
  return Number.isSafeInteger(n) && n >= 1 && 2 ** Math.round(Math.log2(n)) === n;
}

/** log2 of a power of two (31 − leading zeros below 2^31). */
export function log2Exact(n: number): number {
  return n <= 0x7fffffff ? 31 - Math.clz32(n) : Math.round(Math.log2(n));
}

/** MTH(D[start:end]) for a range the RFC's recursion visits (each complete piece is aligned). */
export function rangeHash(tree: NodeSource, start: number, end: number): Buffer {
  const width = end - start;
  if (isPowerOfTwo(width)) {
    const level = log2Exact(width);
    return tree.node(level, start / width);
  }
  const kept = tree.ranges?.get(start, end);
  if (kept !== undefined) return kept;
  const k = splitPoint(width);
  const hash = nodeHash(rangeHash(tree, start, start + k), rangeHash(tree, start + k, end));
  tree.ranges?.set(start, end, hash);
  return hash;
}

function checkSize(tree: NodeSource, size: number): void {
  if (!Number.isSafeInteger(size) || size < 0 || size > tree.size) throw new RangeError(`tree size ${size} is not within 0..${tree.size}`);
}

/** The root of the tree's first `size` leaves. */
export function rootAt(tree: NodeSource, size = tree.size): Buffer {
  checkSize(tree, size);
  return size === 0 ? EMPTY_ROOT : rangeHash(tree, 0, size);
}

/** PATH(index, D[0:size]) (RFC 9162 §2.1.3.1): sibling hashes from the leaf up. */
export function inclusionProof(tree: NodeSource, index: number, size = tree.size): Buffer[] {
  checkSize(tree, size);
  const ranges = inclusionRanges(index, size);
  const siblings: Buffer[] = [];
  for (let i = 0; i < ranges.length; i += 2) siblings.push(rangeHash(tree, ranges[i]!, ranges[i + 1]!));
  return siblings;
}

/**
 * The leaves each hash of PATH(index, D[0:size]) covers, from the leaf up, as [start, end) pairs
 * one after the other: the proof before its hashes are read (see rangeHash). Found bottom-up: on
 * each level the node holding the leaf is paired with its left neighbour (odd), or with what there
 * is of its right one (even, not last), or with nothing (even and last: it is carried up). That is
 * the RFC's recursion unrolled: the same ranges in the same order.
 */
export function inclusionRanges(index: number, size: number): number[] {
  if (!Number.isSafeInteger(index) || index < 0 || index >= size) throw new RangeError(`leaf ${index} is not in a tree of ${size}`);
  const ranges: number[] = [];
  // Node i of width `width` holds the leaf; `last` is the level's last node.
  for (let i = index, last = size - 1, width = 1; last > 0; i = Math.floor(i / 2), last = Math.floor(last / 2), width *= 2) {
    if (i % 2 === 1) ranges.push((i - 1) * width, i * width);
    else if (i < last) ranges.push((i + 1) * width, Math.min((i + 2) * width, size));
  }
  return ranges;
}

/** PROOF(from, D[0:to]) (RFC 9162 §2.1.4.1), for 0 < from ≤ to. */
export function consistencyProof(tree: NodeSource, from: number, to = tree.size): Buffer[] {
  checkSize(tree, to);
  if (!Number.isSafeInteger(from) || from < 1 || from > to) throw new RangeError(`no consistency proof from ${from} to ${to}`);
  const found: Buffer[] = [];
  let [start, end, m, whole] = [0, to, from, true];
  while (m !== end - start) {
    const k = splitPoint(end - start);
    if (m <= k) {
      found.push(rangeHash(tree, start + k, end));
      end = start + k;
    } else {
      found.push(rangeHash(tree, start, start + k));
      start += k;
      m -= k;
      whole = false;
    }
  }
  if (!whole) found.push(rangeHash(tree, start, end));
  return found.reverse();
}

/**
 * The compact range of the first `size` leaves: the hashes of the complete subtrees that tile
 * [0, size), largest first (one per bit set in size). With them, the leaves after `size` are
 * enough to rebuild any later root.
 */
export function compactRange(tree: NodeSource, size: number): { level: number; index: number; hash: Buffer }[] {
  checkSize(tree, size);
  const range: { level: number; index: number; hash: Buffer }[] = [];
  let start = 0;
  for (let level = Math.floor(Math.log2(Math.max(size, 1))); level >= 0; level--) {
    const width = 2 ** level;
    if (start + width > size) continue;
    range.push({ level, index: start / width, hash: tree.node(level, start / width) });
    start += width;
  }
  return range;
}

/**
 * A tree held in memory: every complete subtree's hash, level by level (level 0: the leaves).
 * Appending a leaf adds at most one node per level: O(log n), amortized O(1).
 */
export class MemoryTree implements NodeSource {
  private readonly levels: Buffer[][] = [[]];

  get size(): number {
    return this.levels[0]!.length;
  }

  append(hash: Buffer): void {
    let level = 0;
    let node = hash;
    for (;;) {
      const row = (this.levels[level] ??= []);
      row.push(node);
      if (row.length % 2 === 1) return;
      node = nodeHash(row[row.length - 2]!, node);
      level++;
    }
  }

  node(level: number, index: number): Buffer {
    const found = this.levels[level]?.[index];
    if (found === undefined) throw new RangeError(`no complete node ${level}/${index} in a tree of ${this.size}`);
    return found;
  }
}
