import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../src/domain/jcs.js';
import { GENESIS_HASH, leafInput, makeRow, type LedgerRow } from '../../src/domain/ledger.js';
import { compactRange, consistencyProof, EMPTY_ROOT, inclusionProof, inclusionRanges, leafHash, MemoryTree, rootAt } from '../../src/domain/merkle.js';
import { verifyConsistency, verifyInclusion } from '../../src/domain/merkle-verify.js';
import { rfcConsistency, rfcInclusion } from '../support/rfc9162.js';

// DESIGN §10 vectors (shared/vectors/merkle-v1.json, copied): made by an implementation independent
// of this project, for the ledger-v1 records and the RFC 6962 reference leaves.
interface VectorTree {
  name: string;
  leaf_inputs_hex: string[];
  leaf_hashes: string[];
  roots: Record<string, string>;
  inclusion: { leaf_index: number; tree_size: number; hashes: string[] }[];
  consistency: { from: number; to: number; hashes: string[] }[];
}
const vectors = JSON.parse(readFileSync(new URL('../fixtures/merkle-v1.json', import.meta.url), 'utf8')) as { empty_tree_root: string; trees: VectorTree[] };
const ledgerV1 = readFileSync(new URL('../fixtures/ledger-v1.jsonl', import.meta.url), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const bytes = (h: string): Buffer => Buffer.from(h, 'hex');

function treeOf(inputs: readonly Uint8Array[]): MemoryTree {
  const tree = new MemoryTree();
  for (const input of inputs) tree.append(leafHash(input));
  return tree;
}

/** One byte of one hash changed, for every hash of a proof in turn. */
function* tampered(proof: readonly Buffer[]): Generator<Buffer[]> {
  for (let i = 0; i < proof.length; i++) {
    const copy = proof.map((h) => Buffer.from(h));
    const hash = copy[i]!;
    hash[i % 32] = hash[i % 32]! ^ 0x01;
    yield copy;
  }
}

// An independent check, written here from the definitions of RFC 9162 §2.1.3.1 and §2.1.4.1 (the
// recursion that makes the proofs), not the bit-walking algorithms of §2.1.3.2/§2.1.4.2 that the
// project uses: the proof is consumed from its last (topmost) hash down.
const H = (...parts: Uint8Array[]): Buffer => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};
const node = (l: Uint8Array, r: Uint8Array): Buffer => H(Buffer.from([1]), l, r);
/** The largest power of two below n (n ≥ 2), by doubling: exact for any safe integer (Math.log2 rounds past 2^49). */
const split = (n: number): number => {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
};

function rootFromPath(m: number, n: number, leaf: Buffer, path: Buffer[]): Buffer | null {
  if (n === 1) return path.length === 0 ? leaf : null;
  if (path.length === 0) return null;
  const k = split(n);
  const top = path[path.length - 1]!;
  const rest = path.slice(0, -1);
  if (m < k) {
    const left = rootFromPath(m, k, leaf, rest);
    return left === null ? null : node(left, top);
  }
  const right = rootFromPath(m - k, n - k, leaf, rest);
  return right === null ? null : node(top, right);
}

function independentInclusion(m: number, n: number, leaf: Buffer, path: Buffer[], root: Buffer): boolean {
  if (m < 0 || m >= n) return false;
  const got = rootFromPath(m, n, leaf, path);
  return got !== null && got.equals(root);
}

/** Both roots rebuilt from SUBPROOF(m, D[n], b); `known` is MTH(D[m]) where the proof leaves it out. */
function rootsFromSubproof(m: number, n: number, whole: boolean, proof: Buffer[], known: Buffer): { old: Buffer; now: Buffer; used: number } | null {
  if (m === n) {
    if (whole) return { old: known, now: known, used: 0 };
    const own = proof[proof.length - 1];
    return own === undefined ? null : { old: own, now: own, used: 1 };
  }
  const top = proof[proof.length - 1];
  if (top === undefined) return null;
  const k = split(n);
  const below = proof.slice(0, -1);
  if (m <= k) {
    const sub = rootsFromSubproof(m, k, whole, below, known);
    return sub === null ? null : { old: sub.old, now: node(sub.now, top), used: sub.used + 1 };
  }
  const sub = rootsFromSubproof(m - k, n - k, false, below, known);
  return sub === null ? null : { old: node(top, sub.old), now: node(top, sub.now), used: sub.used + 1 };
}

function independentConsistency(m: number, n: number, oldRoot: Buffer, newRoot: Buffer, proof: Buffer[]): boolean {
  if (m < 1 || m > n) return false;
  const got = rootsFromSubproof(m, n, true, proof, oldRoot);
  return got !== null && got.used === proof.length && got.old.equals(oldRoot) && got.now.equals(newRoot);
}

// A second independent check, from the text of RFC 9162 §2.1.3.2 and §2.1.4.2 (test/support/rfc9162.ts):
// it shares no code with the project's verifier (src/domain/merkle-verify.ts), which it must agree with.

describe('RFC 9162 Merkle trees: the vectors (merkle-v1.json)', () => {
  it('has the empty tree root', () => {
    expect(hex(EMPTY_ROOT)).toBe(vectors.empty_tree_root);
    expect(hex(rootAt(new MemoryTree()))).toBe(vectors.empty_tree_root);
  });

  it('takes as leaf input the bytes each ledger-v1 record\'s content_hash covers', () => {
    const tree = vectors.trees.find((t) => t.name === 'ledger-v1')!;
    const inputs = ledgerV1.map((r) =>
      leafInput({ seq: r.seq as number, kind: r.kind as string, recordedAt: r.recorded_at as string, agentId: r.agent_id as string | null, bodyJson: canonicalize(r.body) }),
    );
    expect(inputs.map(hex)).toEqual(tree.leaf_inputs_hex);
    inputs.forEach((input, i) => expect(H(input).toString('hex')).toBe(ledgerV1[i]!.content_hash));
  });

  for (const vector of vectors.trees) {
    describe(vector.name, () => {
      const inputs = vector.leaf_inputs_hex.map(bytes);
      const tree = treeOf(inputs);

      it('reproduces every leaf hash and every root', () => {
        expect(inputs.map((input) => hex(leafHash(input)))).toEqual(vector.leaf_hashes);
        for (const [size, root] of Object.entries(vector.roots)) expect(hex(rootAt(tree, Number(size))), `size ${size}`).toBe(root);
      });

      it('reproduces every inclusion proof, which both verifiers accept and reject once changed', () => {
        expect(vector.inclusion.length).toBeGreaterThan(0);
        for (const { leaf_index: m, tree_size: n, hashes } of vector.inclusion) {
          const proof = inclusionProof(tree, m, n);
          expect(proof.map(hex), `leaf ${m} of ${n}`).toEqual(hashes);
          const [leaf, root] = [bytes(vector.leaf_hashes[m]!), bytes(vector.roots[String(n)]!)];
          expect(verifyInclusion(m, n, leaf, proof, root)).toBe(true);
          expect(independentInclusion(m, n, leaf, proof, root)).toBe(true);
          expect(rfcInclusion(m, n, leaf, proof, root)).toBe(true);
          for (const bad of tampered(proof)) {
            expect(verifyInclusion(m, n, leaf, bad, root)).toBe(false);
            expect(independentInclusion(m, n, leaf, bad, root)).toBe(false);
            expect(rfcInclusion(m, n, leaf, bad, root)).toBe(false);
          }
          if (n > 1) expect(verifyInclusion((m + 1) % n, n, leaf, proof, root), `leaf ${m} of ${n} at the wrong index`).toBe(false);
        }
      });

      it('reproduces every consistency proof, which both verifiers accept and reject once changed', () => {
        expect(vector.consistency.length).toBeGreaterThan(0);
        for (const { from, to, hashes } of vector.consistency) {
          const proof = consistencyProof(tree, from, to);
          expect(proof.map(hex), `${from} → ${to}`).toEqual(hashes);
          const [a, b] = [bytes(vector.roots[String(from)]!), bytes(vector.roots[String(to)]!)];
          expect(verifyConsistency(from, to, a, b, proof)).toBe(true);
          expect(independentConsistency(from, to, a, b, proof)).toBe(true);
          expect(rfcConsistency(from, to, a, b, proof)).toBe(true);
          for (const bad of tampered(proof)) {
            expect(verifyConsistency(from, to, a, b, bad)).toBe(false);
            expect(independentConsistency(from, to, a, b, bad)).toBe(false);
            expect(rfcConsistency(from, to, a, b, bad)).toBe(false);
          }
          if (from < to) expect(verifyConsistency(from, to, b, a, proof), `${from} → ${to} with the roots swapped`).toBe(false);
        }
      });
    });
  }
});

describe('the Merkle tree of a 1,000-record ledger', () => {
  const rows: LedgerRow[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= 1000; seq++) {
    const row = makeRow(prev, seq, 'event', new Date(Date.UTC(2026, 10, 1, 0, 0, seq)).toISOString(), `agent-${seq % 7}`, { n: seq, note: 'ü'.repeat(seq % 5) });
    rows.push(row);
    prev = row.chainHash;
  }
  const tree = treeOf(rows.map(leafInput));
  const root = rootAt(tree);

  it('proves every record\'s inclusion to both independent verifiers (RFC 9162 §2.1.3.2 and §2.1.3.1), and no changed proof', () => {
    for (let m = 0; m < 1000; m++) {
      const leaf = leafHash(leafInput(rows[m]!));
      const proof = inclusionProof(tree, m);
      expect(proof.length).toBeLessThanOrEqual(10);
      expect(rfcInclusion(m, 1000, leaf, proof, root), `seq ${m + 1}`).toBe(true);
      expect(independentInclusion(m, 1000, leaf, proof, root), `seq ${m + 1}`).toBe(true);
      expect(verifyInclusion(m, 1000, leaf, proof, root)).toBe(true);
      for (const bad of tampered(proof)) {
        expect(rfcInclusion(m, 1000, leaf, bad, root)).toBe(false);
        expect(independentInclusion(m, 1000, leaf, bad, root)).toBe(false);
        expect(verifyInclusion(m, 1000, leaf, bad, root)).toBe(false);
      }
      // The right proof for another record, or for this record at another index, is refused.
      expect(rfcInclusion((m + 1) % 1000, 1000, leaf, proof, root)).toBe(false);
      expect(rfcInclusion(m, 1000, leafHash(leafInput(rows[(m + 1) % 1000]!)), proof, root)).toBe(false);
    }
  });

  it('proves consistency between sizes to both independent verifiers (RFC 9162 §2.1.4.2 and §2.1.4.1)', () => {
    const sizes = [1, 2, 3, 7, 8, 9, 63, 64, 65, 255, 256, 500, 511, 512, 513, 999, 1000];
    for (const from of sizes) {
      for (const to of sizes.filter((s) => s >= from)) {
        const proof = consistencyProof(tree, from, to);
        const [a, b] = [rootAt(tree, from), rootAt(tree, to)];
        expect(rfcConsistency(from, to, a, b, proof), `${from} → ${to}`).toBe(true);
        expect(independentConsistency(from, to, a, b, proof), `${from} → ${to}`).toBe(true);
        expect(verifyConsistency(from, to, a, b, proof)).toBe(true);
        for (const bad of tampered(proof)) {
          expect(rfcConsistency(from, to, a, b, bad)).toBe(false);
          expect(verifyConsistency(from, to, a, b, bad)).toBe(false);
        }
      }
    }
  });

  it('gives each later root from its compact range and the leaves after it (what a bundle carries)', () => {
    for (const size of [0, 1, 5, 64, 100, 777, 1000]) {
      const range = compactRange(tree, size);
      // One subtree per bit set in size, largest first.
      expect(range.map((r) => r.level)).toEqual([...size.toString(2)].flatMap((bit, i, all) => (bit === '1' ? [all.length - 1 - i] : [])));
      // A client's fold: push each later leaf, merging equal levels; the root folds the stack right to left.
      const stack = range.map((r) => ({ level: r.level, hash: r.hash }));
      for (let i = size; i < 1000; i++) {
        stack.push({ level: 0, hash: leafHash(leafInput(rows[i]!)) });
        while (stack.length > 1 && stack[stack.length - 1]!.level === stack[stack.length - 2]!.level) {
          const right = stack.pop()!;
          const left = stack.pop()!;
          stack.push({ level: left.level + 1, hash: node(left.hash, right.hash) });
        }
      }
      const folded = stack.reduceRight<Buffer | null>((acc, s) => (acc === null ? s.hash : node(s.hash, acc)), null);
      expect(folded?.toString('hex'), `from ${size}`).toBe(root.toString('hex'));
    }
  });

  it('refuses sizes and leaves outside the tree', () => {
    expect(() => rootAt(tree, 1001)).toThrow(RangeError);
    expect(() => inclusionProof(tree, 1000)).toThrow(RangeError);
    expect(() => consistencyProof(tree, 0, 10)).toThrow(RangeError);
    expect(() => consistencyProof(tree, 11, 10)).toThrow(RangeError);
    expect(verifyInclusion(5, 5, root, [], root)).toBe(false);
    expect(verifyConsistency(0, 5, root, root, [])).toBe(false);
    expect(verifyConsistency(3, 5, root, root, [])).toBe(false);
  });
});

describe('the leaf ranges a proof\'s hashes cover (found bottom-up, without the recursion)', () => {
  /** PATH(m, D[start:end]) of RFC 9162 §2.1.3.1, as the ranges its hashes cover, leaf first. */
  function pathRanges(m: number, start: number, end: number): number[] {
    const n = end - start;
    if (n === 1) return [];
    const k = split(n);
    return m < k ? [...pathRanges(m, start, start + k), start + k, end] : [...pathRanges(m - k, start + k, end), start, start + k];
  }

  it('are those of the RFC\'s recursion for every leaf of every tree up to 300 leaves', () => {
    for (let n = 1; n <= 300; n++) for (let m = 0; m < n; m++) expect(inclusionRanges(m, n), `leaf ${m} of ${n}`).toEqual(pathRanges(m, 0, n));
  });

  it('and for leaves of trees past 2^32 and up to 2^52 (no 32-bit arithmetic)', () => {
    for (const n of [2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 3 * 2 ** 40 + 12345, 2 ** 51 + 1, 2 ** 52 - 3]) {
      for (const m of [0, 1, 2 ** 31, 2 ** 32 - 2, Math.floor(n / 3), n - 2, n - 1]) expect(inclusionRanges(m, n), `leaf ${m} of ${n}`).toEqual(pathRanges(m, 0, n));
    }
  });
});
