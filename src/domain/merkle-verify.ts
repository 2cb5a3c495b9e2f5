import { isPowerOfTwo, nodeHash } from './merkle.js';

/**
 * The checks of RFC 9162 §2.1.3.2 and §2.1.4.2, as a client runs them: from a proof and the
 * hashes it is given, with nothing of the tree. Both return false for any proof that does not
 * prove what it claims (never throw on bad input).
 */

/** Whether `proof` shows the leaf `leaf` at `index` in the tree of `size` leaves whose root is `root`. */
export function verifyInclusion(index: number, size: number, leaf: Uint8Array, proof: readonly Uint8Array[], root: Uint8Array): boolean {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let r: Uint8Array = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      while (fn % 2 === 0 && fn !== 0) [fn, sn] = [half(fn), half(sn)];
    } else {
      r = nodeHash(r, p);
    }
    [fn, sn] = [half(fn), half(sn)];
  }
  return sn === 0 && same(r, root);
}

/** Whether `proof` shows the tree of `from` leaves (root `fromRoot`) to be a prefix of the one of `to` (root `toRoot`). */
export function verifyConsistency(from: number, to: number, fromRoot: Uint8Array, toRoot: Uint8Array, proof: readonly Uint8Array[]): boolean {
  if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from < 1 || from > to) return false;
  if (from === to) return proof.length === 0 && same(fromRoot, toRoot);
  if (proof.length === 0) return false;
  const path = isPowerOfTwo(from) ? [fromRoot, ...proof] : [...proof];
  let fn = from - 1;
  let sn = to - 1;
  while (fn % 2 === 1) [fn, sn] = [half(fn), half(sn)];
  let fr: Uint8Array = path[0]!;
  let sr: Uint8Array = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while (fn % 2 === 0 && fn !== 0) [fn, sn] = [half(fn), half(sn)];
    } else {
      sr = nodeHash(sr, c);
    }
    [fn, sn] = [half(fn), half(sn)];
  }
  return sn === 0 && same(fr, fromRoot) && same(sr, toRoot);
}

const half = (n: number): number => Math.floor(n / 2);

function same(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.compare(a, b) === 0;
}
