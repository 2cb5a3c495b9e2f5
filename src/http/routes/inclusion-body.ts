import { inclusionRanges, isPowerOfTwo, log2Exact, rangeHash } from '../../domain/merkle.js';
import { nodeOffset, type StripedTree } from '../../domain/striped-tree.js';

const DIGITS = '0123456789abcdef';

/** Each byte's two hex digits, as the big-endian 16 bits of their ASCII codes. */
const HEX_PAIRS = Uint16Array.from({ length: 256 }, (_, byte) => (DIGITS.charCodeAt(byte >> 4) << 8) | DIGITS.charCodeAt(byte & 15));
const HASHES = Buffer.from('","hashes":[', 'latin1');
const CHECKPOINT = Buffer.from('],"checkpoint":', 'latin1');
const NULL = Buffer.from('null', 'latin1');

/**
 * The body of `GET /audit/proof/inclusion`, the JSON of {seq, leaf_index, tree_size, leaf_hash,
 * hashes, checkpoint}, written straight into bytes: each hash is hex-encoded from where the tree
 * holds it (its stripe in memory, see StripedTree.nodeBytes), with no Buffer, string or view made
 * for it. It is the route's hot path: a proof's ~20 hashes cost it more as objects than as reads.
 * `checkpoint` is the JSON of the checkpoint the proof leads to, or null. The caller has checked
 * that the tree holds `size` leaves and that 1 ≤ seq ≤ size (a leaf outside throws a RangeError).
 *
 * The bytes are valid until the next call (see scratch): send them at once, or copy them.
 */
export function inclusionBody(tree: StripedTree, seq: number, size: number, checkpoint: Buffer | null): Buffer {
  const ranges = inclusionRanges(seq - 1, size);
  const head = `{"seq":${seq},"leaf_index":${seq - 1},"tree_size":${size},"leaf_hash":"`;
  const hashes = ranges.length / 2;
  const tail = checkpoint ?? NULL;
  // Each hash in the list is "<64 hex>" and a comma but the last.
  const length = head.length + 64 + HASHES.length + hashes * 67 - Math.min(hashes, 1) + CHECKPOINT.length + tail.length + 1;
  const { bytes: out, view } = scratch(length);
  let at = out.write(head, 0, 'latin1');
  const leaf = tree.nodeBytes(0, seq - 1);
  at = writeHex(view, at, leaf, nodeOffset(leaf, seq - 1));
  out.set(HASHES, at);
  at += HASHES.length;
  for (let i = 0; i < ranges.length; i += 2) {
    if (i > 0) out[at++] = 0x2c; // ,
    out[at++] = 0x22; // "
    at = writeRange(view, at, tree, ranges[i]!, ranges[i + 1]!);
    out[at++] = 0x22;
  }
  out.set(CHECKPOINT, at);
  out.set(tail, at + CHECKPOINT.length);
  at += CHECKPOINT.length + tail.length;
  out[at++] = 0x7d; // }
  if (at !== length) throw new Error(`an inclusion proof body of ${at} bytes where ${length} were reckoned`);
  return out.subarray(0, at);
}

/** Where bodies are written (see scratch). */
const body = { bytes: Buffer.alloc(0), view: new DataView(new ArrayBuffer(0)) };

/**
 * At least `length` bytes to write a body in, the same ones every call (grown when a body needs
 * more). A body of its own per request, from Node's pool or a block of ours, is external memory
 * the GC accounts: at tens of thousands of proofs a second it ran a full collection every few
 * hundred milliseconds (the route's p99 went from 3 to 12 ms). The route hands the body to
 * uWebSockets.js at once, which copies it before the next request runs.
 */
function scratch(length: number): typeof body {
  if (body.bytes.length < length) {
    body.bytes = Buffer.allocUnsafeSlow(Math.max(4096, 2 * length));
    body.view = new DataView(body.bytes.buffer, body.bytes.byteOffset, body.bytes.length);
  }
  return body;
}

/** MTH(D[start:end]) in hex at `at`: a stored node read where it is, a right-edge range hashed (see rangeHash). */
function writeRange(view: DataView, at: number, tree: StripedTree, start: number, end: number): number {
  const width = end - start;
  if (!isPowerOfTwo(width)) return writeHex(view, at, rangeHash(tree, start, end), 0);
  const index = start / width;
  const bytes = tree.nodeBytes(log2Exact(width), index);
  return writeHex(view, at, bytes, nodeOffset(bytes, index));
}

/** The 32 bytes of `bytes` from `from`, as 64 hex digits at `at`; returns where they end. */
function writeHex(view: DataView, at: number, bytes: Buffer, from: number): number {
  for (let i = from; i < from + 32; i++, at += 2) view.setUint16(at, HEX_PAIRS[bytes[i]!]!);
  return at;
}
