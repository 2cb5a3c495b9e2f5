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
 * `checkpoint` is the JSON of the checkpoint the proof leads to, or null.
 */
export function inclusionBody(tree: StripedTree, seq: number, size: number, checkpoint: Buffer | null): Buffer {
  const ranges = inclusionRanges(seq - 1, size);
  const head = `{"seq":${seq},"leaf_index":${seq - 1},"tree_size":${size},"leaf_hash":"`;
  const hashes = ranges.length / 2;
  const tail = checkpoint ?? NULL;
  // Each hash in the list is "<64 hex>" and a comma but the last.
  const length = head.length + 64 + HASHES.length + hashes * 67 - Math.min(hashes, 1) + CHECKPOINT.length + tail.length + 1;
  const { bytes: out, view, start } = space(length);
  let at = start + out.write(head, start, 'latin1');
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
  return out.subarray(start, at);
}

/** Where bodies are written: a block of BLOCK bytes, with a DataView of it, used up to `used`. */
const BLOCK = 1 << 20;
const block = { bytes: Buffer.alloc(0), view: new DataView(new ArrayBuffer(0)), used: 0, start: 0 };

/**
 * `length` bytes for one body, at block.start of block.bytes. Bodies are cut from 1 MB blocks,
 * never reused (a block is freed once no body cut from it is referenced): one allocation for
 * hundreds of proofs, where Node's 8 KB pool would allocate one for every four, and the GC pays for
 * each of them.
 */
function space(length: number): typeof block {
  if (block.used + length > block.bytes.length) {
    block.bytes = Buffer.allocUnsafeSlow(Math.max(BLOCK, length));
    block.view = new DataView(block.bytes.buffer, block.bytes.byteOffset, block.bytes.length);
    block.used = 0;
  }
  block.start = block.used;
  block.used += length;
  return block;
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
