import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { consistencyProof, inclusionProof, leafHash, MemoryTree, nodeHash, rootAt } from '../../src/domain/merkle.js';
import { jsNodes, STRIPE_WIDTH, StripedTree } from '../../src/domain/striped-tree.js';
import { nativeSha256Nodes } from '../../src/store/batch-hash.js';
import { MapStripes } from '../support/map-stripes.js';

const leaf = (i: number): Buffer => leafHash(createHash('sha256').update(`leaf ${i}`).digest());

const N = 3 * STRIPE_WIDTH * STRIPE_WIDTH + 700; // three level-1 stripes filled, and a part-filled edge on every level

describe('a Merkle tree kept as stripes of 256 hashes', () => {
  const reference = new MemoryTree();
  const store = new MapStripes();
  const tree = StripedTree.empty(store);
  for (let i = 0; i < N; i++) {
    reference.append(leaf(i));
    store.put(tree.append(leaf(i)));
  }

  it('holds every node the in-memory tree holds, full stripes in storage and the rest in memory', () => {
    expect(tree.size).toBe(N);
    for (let level = 0, count = N; count > 0; level++, count = Math.floor(count / 2)) {
      for (let i = 0; i < count; i += level < 3 ? 37 : 1) expect(tree.node(level, i).equals(reference.node(level, i)), `node ${level}/${i}`).toBe(true);
      expect(tree.partial(level)).toHaveLength(count % STRIPE_WIDTH);
    }
    expect(store.stripes.size).toBe(Math.floor(N / STRIPE_WIDTH) + expectedAbove(N));
  });

  it('gives the same roots and proofs as the in-memory tree', () => {
    for (const size of [1, 255, 256, 257, 65_536, N - 1, N]) {
      expect(rootAt(tree, size).equals(rootAt(reference, size)), `root ${size}`).toBe(true);
      const m = Math.floor(size / 3);
      expect(inclusionProof(tree, m, size)).toEqual(inclusionProof(reference, m, size));
      expect(consistencyProof(tree, Math.max(1, m), size)).toEqual(consistencyProof(reference, Math.max(1, m), size));
    }
  });

  it('reads O(log n) stripes for a proof or a root', () => {
    store.reads = 0;
    inclusionProof(tree, 12_345, N);
    expect(store.reads).toBeLessThanOrEqual(2 * Math.ceil(Math.log2(N)));
    store.reads = 0;
    rootAt(tree);
    expect(store.reads).toBeLessThanOrEqual(Math.ceil(Math.log2(N)));
  });

  it('resumes from storage at any whole stripe and goes on to the same tree', () => {
    for (const at of [0, 256, 512, 65_536, 131_072 + 256, Math.floor(N / 256) * 256]) {
      // Storage as it was when the tree had `at` leaves: level 0's first at/256 stripes, and what they filled above.
      const earlier = new MapStripes();
      for (const [key, bytes] of store.stripes) {
        const [level, index] = key.split('/').map(Number) as [number, number];
        if ((index + 1) * STRIPE_WIDTH * 2 ** level <= at) earlier.stripes.set(key, bytes);
      }
      const resumed = StripedTree.resume(earlier, at);
      expect(resumed.size).toBe(at);
      if (at > 0) expect(rootAt(resumed).equals(rootAt(reference, at)), `root at ${at}`).toBe(true);
      for (let i = at; i < Math.min(N, at + 1000); i++) earlier.put(resumed.append(leaf(i)));
      const size = Math.min(N, at + 1000);
      expect(rootAt(resumed).equals(rootAt(reference, size)), `resumed at ${at}, root at ${size}`).toBe(true);
    }
  });

  it('refuses to resume a size that is not whole stripes, and says when a stored stripe is gone', () => {
    expect(() => StripedTree.resume(store, 300)).toThrow(RangeError);
    const broken = new MapStripes();
    for (const [key, bytes] of store.stripes) if (key !== '0/1') broken.stripes.set(key, bytes);
    const resumed = StripedTree.resume(broken, 1024);
    expect(() => resumed.node(0, 300)).toThrow(/stripe 0\/1 .* missing/);
  });
});

describe('appending leaves a batch at a time', () => {
  const batchSizes = [1, 2, 3, 7, 255, 256, 257, 1, 511, 1000, 4096, 13];
  const hashers = { native: nativeSha256Nodes, 'node:crypto': jsNodes };

  for (const [name, hashNodes] of Object.entries(hashers)) {
    // Skipped where the native hasher is not built (no C toolchain).
    it.skipIf(hashNodes === null)(`gives the same nodes, stripes and proofs as leaf by leaf (${name} hashing)`, () => {
      if (hashNodes === null) throw new Error('skipped');
      const reference = new MemoryTree();
      const single = new MapStripes();
      const batched = new MapStripes();
      const one = StripedTree.empty(single);
      const many = StripedTree.empty(batched);
      let i = 0;
      for (let round = 0; i < 3 * STRIPE_WIDTH * 40; round++) {
        const leaves = Array.from({ length: batchSizes[round % batchSizes.length]! }, () => leaf(i++));
        for (const l of leaves) {
          reference.append(l);
          single.put(one.append(l));
        }
        batched.put(many.appendAll(leaves, hashNodes));
        expect(many.size).toBe(i);
      }
      expect([...batched.stripes.keys()].sort()).toEqual([...single.stripes.keys()].sort());
      for (const [key, bytes] of single.stripes) expect(batched.stripes.get(key)!.equals(bytes), `stripe ${key}`).toBe(true);
      for (let level = 0, count = i; count > 0; level++, count = Math.floor(count / 2)) {
        expect(many.partial(level).map((h) => h.toString('hex')), `open stripe of level ${level}`).toEqual(one.partial(level).map((h) => h.toString('hex')));
      }
      for (const size of [1, 256, 1000, i]) {
        expect(rootAt(many, size).equals(rootAt(reference, size)), `root ${size}`).toBe(true);
        expect(inclusionProof(many, size - 1, size)).toEqual(inclusionProof(reference, size - 1, size));
      }
    });
  }

  it('keeps the stripe filling small for a small tree, and hashes read from it unchanged while it grows and fills', () => {
    const store = new MapStripes();
    const tree = StripedTree.empty(store);
    store.put(tree.appendAll(Array.from({ length: 5 }, (_, i) => leaf(i)), nativeSha256Nodes ?? jsNodes));
    // Five leaves: no level holds a stripe's 8 KB.
    for (let level = 0; level < 3; level++) expect(tree.nodeBytes(level, 0).length).toBeLessThan(STRIPE_WIDTH * 32);
    const early = [tree.node(0, 4), tree.node(1, 1), tree.node(2, 0)].map((hash) => Buffer.from(hash));
    const views = [tree.node(0, 4), tree.node(1, 1), tree.node(2, 0)];
    for (let i = 5; i < 3 * STRIPE_WIDTH; i += 37) store.put(tree.appendAll(Array.from({ length: 37 }, (_, k) => leaf(i + k)), nativeSha256Nodes ?? jsNodes));
    expect(store.stripes.has('0/0')).toBe(true);
    views.forEach((view, i) => expect(view.equals(early[i]!), `view ${i}`).toBe(true));
    const reference = new MemoryTree();
    for (let i = 0; i < tree.size; i++) reference.append(leaf(i));
    expect(rootAt(tree, tree.size).equals(rootAt(reference, tree.size))).toBe(true);
  });

  it('hashes the parents of pairs as RFC 9162 does, natively and with node:crypto', () => {
    const pairs = Buffer.concat([leaf(1), leaf(2), leaf(3), leaf(4)]);
    const expected = Buffer.concat([nodeHash(leaf(1), leaf(2)), nodeHash(leaf(3), leaf(4))]);
    for (const hashNodes of [nativeSha256Nodes, jsNodes]) {
      if (hashNodes === null) continue;
      const out = Buffer.alloc(64);
      hashNodes(pairs, out);
      expect(out.equals(expected)).toBe(true);
    }
    if (nativeSha256Nodes !== null) {
      expect(() => nativeSha256Nodes!(pairs.subarray(0, 63), Buffer.alloc(64))).toThrow(RangeError);
      expect(() => nativeSha256Nodes!(pairs, Buffer.alloc(63))).toThrow(RangeError);
    }
  });
});

/** Full stripes on levels 1 and up for n leaves. */
function expectedAbove(n: number): number {
  let total = 0;
  for (let count = Math.floor(n / 2); count >= STRIPE_WIDTH; count = Math.floor(count / 2)) total += Math.floor(count / STRIPE_WIDTH);
  return total;
}
