import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { inclusionProof, leafHash, MemoryTree } from '../../src/domain/merkle.js';
import { STRIPE_WIDTH, StripedTree } from '../../src/domain/striped-tree.js';
import { inclusionBody } from '../../src/http/routes/inclusion-body.js';
import { MapStripes } from '../support/map-stripes.js';

const leaf = (i: number): Buffer => leafHash(createHash('sha256').update(`leaf ${i}`).digest());

const N = STRIPE_WIDTH * STRIPE_WIDTH + 300; // a full level-1 stripe, part-filled edges on every level

describe('the inclusion proof body, written straight into bytes', () => {
  const reference = new MemoryTree();
  const store = new MapStripes({ copyHashes: true });
  const tree = StripedTree.empty(store);
  for (let i = 0; i < N; i++) {
    reference.append(leaf(i));
    store.put(tree.append(leaf(i)));
  }
  const note = 'example.org/log\n65836\nq8Qb2c=\n\n— example.org/log AAAA\n';
  const expected = (seq: number, size: number, checkpoint: string | null): string =>
    JSON.stringify({
      seq,
      leaf_index: seq - 1,
      tree_size: size,
      leaf_hash: reference.node(0, seq - 1).toString('hex'),
      hashes: inclusionProof(reference, seq - 1, size).map((h) => h.toString('hex')),
      checkpoint,
    });

  it('is byte for byte the JSON of the proof, for leaves across stripes, edges and sizes, with and without a checkpoint', () => {
    const sizes = [1, 2, 3, 255, 256, 257, 511, 65_536, 65_537, N - 1, N];
    for (const size of sizes) {
      for (const seq of new Set([1, 2, Math.ceil(size / 2), size - 256, size - 1, size].filter((s) => s >= 1 && s <= size))) {
        expect(inclusionBody(tree, seq, size, null).toString('utf8'), `seq ${seq} of ${size}`).toBe(expected(seq, size, null));
      }
    }
    // The checkpoint's JSON (its signature line has a non-ASCII dash) is copied as its UTF-8 bytes.
    const body = inclusionBody(tree, 777, N, Buffer.from(JSON.stringify(note)));
    expect(body.toString('utf8')).toBe(expected(777, N, note));
    expect(JSON.parse(body.toString('utf8'))).toMatchObject({ seq: 777, checkpoint: note });
  });

  it('writes each body over the last (valid until the next call), growing its bytes for a longer one', () => {
    const first = inclusionBody(tree, 1, 1, null);
    expect(first.toString('utf8')).toBe(expected(1, 1, null));
    const long = Buffer.from(JSON.stringify('x'.repeat(10_000)));
    expect(inclusionBody(tree, 1000, N, long).toString('utf8')).toBe(expected(1000, N, 'x'.repeat(10_000)));
    for (let i = 0; i < 200; i++) {
      const seq = 1 + ((i * 7919) % N);
      expect(inclusionBody(tree, seq, N, null).toString('utf8'), `seq ${seq}`).toBe(expected(seq, N, null));
    }
  });

  it('refuses a leaf outside the tree', () => {
    expect(() => inclusionBody(tree, N + 1, N, null)).toThrow(RangeError);
    expect(() => inclusionBody(tree, 0, N, null)).toThrow(RangeError);
  });
});
