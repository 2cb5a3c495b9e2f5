import { createHash } from 'node:crypto';

// An independent check of RFC 9162 trees, written here step by step from the text of §2.1.1 (the
// Merkle Tree Hash), §2.1.3.2 and §2.1.4.2 (the verification algorithms), with its own hashing and
// bigint shifts: it shares no code with the project's (src/domain/merkle*.ts), which it must agree with.

const sha256 = (...parts: Uint8Array[]): Buffer => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};
const node = (left: Uint8Array, right: Uint8Array): Buffer => sha256(Buffer.from([1]), left, right);
const lsb = (x: bigint): boolean => (x & 1n) === 1n;

/** MTH(D[n]) of §2.1.1, of the leaf inputs (not their hashes), by its recursion. */
export function rfcRoot(leafInputs: readonly Uint8Array[]): Buffer {
  if (leafInputs.length === 0) return sha256();
  if (leafInputs.length === 1) return sha256(Buffer.from([0]), leafInputs[0]!);
  let k = 1;
  while (k * 2 < leafInputs.length) k *= 2;
  return node(rfcRoot(leafInputs.slice(0, k)), rfcRoot(leafInputs.slice(k)));
}

/** The leaf hash of §2.1.1: SHA-256(0x00 ‖ input). */
export const rfcLeafHash = (leafInput: Uint8Array): Buffer => sha256(Buffer.from([0]), leafInput);

/** §2.1.3.2: whether `inclusionPath` proves `hash` (a leaf hash) at `leafIndex` of the tree of `treeSize` with root `rootHash`. */
export function rfcInclusion(leafIndex: number, treeSize: number, hash: Buffer, inclusionPath: Buffer[], rootHash: Buffer): boolean {
  // 1. leaf_index >= tree_size fails.
  if (leafIndex >= treeSize || leafIndex < 0) return false;
  // 2, 3.
  let fn = BigInt(leafIndex);
  let sn = BigInt(treeSize - 1);
  let r = hash;
  // 4.
  for (const p of inclusionPath) {
    if (sn === 0n) return false; // a.
    if (lsb(fn) || fn === sn) {
      r = node(p, r); // b.i.
      if (!lsb(fn)) while (!lsb(fn) && fn !== 0n) [fn, sn] = [fn >> 1n, sn >> 1n]; // b.ii.
    } else {
      r = node(r, p);
    }
    [fn, sn] = [fn >> 1n, sn >> 1n]; // c.
  }
  // 5.
  return sn === 0n && r.equals(rootHash);
}

/** §2.1.4.2: whether `consistencyPath` proves the tree of `first` leaves (root `firstHash`) a prefix of the one of `second` (root `secondHash`). */
export function rfcConsistency(first: number, second: number, firstHash: Buffer, secondHash: Buffer, consistencyPath: Buffer[]): boolean {
  if (first < 1 || first > second) return false;
  // §2.1.4.1: the proof between equal sizes is empty; the roots must then be the same.
  if (first === second) return consistencyPath.length === 0 && firstHash.equals(secondHash);
  // 1.
  if (consistencyPath.length === 0) return false;
  // 2. (first is a power of two: exact for any safe integer, unlike a 32-bit mask)
  const firstBig = BigInt(first);
  const path = (firstBig & (firstBig - 1n)) === 0n ? [firstHash, ...consistencyPath] : consistencyPath;
  // 3, 4.
  let fn = BigInt(first - 1);
  let sn = BigInt(second - 1);
  while (lsb(fn)) [fn, sn] = [fn >> 1n, sn >> 1n];
  // 5.
  let fr = path[0]!;
  let sr = path[0]!;
  // 6.
  for (const c of path.slice(1)) {
    if (sn === 0n) return false; // a.
    if (lsb(fn) || fn === sn) {
      fr = node(c, fr); // b.i.
      sr = node(c, sr); // b.ii.
      if (!lsb(fn)) while (!lsb(fn) && fn !== 0n) [fn, sn] = [fn >> 1n, sn >> 1n]; // b.iii.
    } else {
      sr = node(sr, c);
    }
    [fn, sn] = [fn >> 1n, sn >> 1n]; // c.
  }
  // 7.
  return fr.equals(firstHash) && sr.equals(secondHash) && sn === 0n;
}

/**
 * A record's leaf input as an auditor makes it from an export line (DESIGN §4, §10): the JCS
 * (RFC 8785) bytes of `{seq, kind, recorded_at, agent_id, body}`, the bytes `content_hash` covers,
 * written here without the project's canonicalizer. For the I-JSON an export holds, JCS writes
 * strings and numbers as ECMAScript's JSON.stringify does, and each object's members sorted by
 * their names' UTF-16 code units (written out here: a JS object would list integer-like names first).
 * It throws unless the result hashes to the line's `content_hash`.
 */
export function exportLeafInput(line: { seq: number; kind: string; recorded_at: string; agent_id: string | null; body: unknown; content_hash: string }): Buffer {
  const jcs = (value: unknown): string => {
    if (Array.isArray(value)) return `[${value.map(jcs).join(',')}]`;
    if (value === null || typeof value !== 'object') return JSON.stringify(value);
    const members = value as Record<string, unknown>;
    return `{${Object.keys(members)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${jcs(members[name])}`)
      .join(',')}}`;
  };
  const { seq, kind, recorded_at, agent_id, body } = line;
  const input = Buffer.from(jcs({ seq, kind, recorded_at, agent_id, body }), 'utf8');
  const hash = createHash('sha256').update(input).digest('hex');
  if (hash !== line.content_hash) throw new Error(`record ${seq}: the leaf input made from the export hashes to ${hash}, not its content_hash ${line.content_hash}`);
  return input;
}
