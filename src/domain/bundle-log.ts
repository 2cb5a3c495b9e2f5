import { z } from 'zod';
import { EMPTY_ROOT, nodeHash } from './merkle.js';

/**
 * What ties an export bundle to the org's transparency log (DESIGN §10): `checkpoint.txt`, the
 * log's signed checkpoint at the bundle's until_seq, and `merkle.json`, the compact range of the
 * leaves before its window. An offline verifier appends the window's leaves (hashed from
 * ledger.jsonl) to the range and must reach the checkpoint's root: the window is then exactly the
 * records the log signed, with nothing before it needed but O(log n) hashes.
 */
export const CHECKPOINT_FILE = 'checkpoint.txt';
export const MERKLE_FILE = 'merkle.json';
export const BUNDLE_LOG_FILES = [CHECKPOINT_FILE, MERKLE_FILE] as const;

/** One complete subtree of the range: leaves [index·2^level, (index+1)·2^level). */
export interface RangeNode {
  level: number;
  index: number;
  /** Hex. */
  hash: string;
}

/** merkle.json. */
export interface MerkleFile {
  /** The leaves the range covers: leaves 0..since_seq-1, the records before the window. */
  since_seq: number;
  /** The tree size the window ends at (the checkpoint's). */
  tree_size: number;
  /** The complete subtrees tiling [0, since_seq), largest first (one per bit set in since_seq). */
  range: RangeNode[];
}

const hex64 = z.string().regex(/^[0-9a-f]{64}$/, '64 lowercase hex characters');
const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const merkleSchema = z.strictObject({
  since_seq: count,
  tree_size: count,
  range: z.array(z.strictObject({ level: z.number().int().min(0).max(63), index: count, hash: hex64 })).max(64),
});

export function merkleFileText(file: MerkleFile): string {
  return `${JSON.stringify(file, null, 2)}\n`;
}

/** merkle.json read and checked for shape and for being the compact range of its since_seq; or a problem. */
export function parseMerkleFile(text: string): { file: MerkleFile } | { problem: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { problem: `not JSON (${(error as Error).message.replace(/\s*\n\s*/g, ' ')})` };
  }
  const parsed = merkleSchema.safeParse(json);
  if (!parsed.success) return { problem: parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ') };
  const file = parsed.data;
  let start = 0;
  for (const [i, node] of file.range.entries()) {
    const width = 2 ** node.level;
    if (i > 0 && node.level >= file.range[i - 1]!.level) return { problem: `range.${i}: levels must decrease` };
    if (node.index * width !== start) return { problem: `range.${i}: subtree ${node.level}/${node.index} does not start at leaf ${start}` };
    start += width;
  }
  if (start !== file.since_seq) return { problem: `range covers ${start} leaves, since_seq is ${file.since_seq}` };
  if (file.tree_size < file.since_seq) return { problem: `tree_size ${file.tree_size} is below since_seq ${file.since_seq}` };
  return { file };
}

/**
 * The root of the tree made of the range's subtrees followed by `leaves` (leaf hashes, in order):
 * RFC 9162's MTH of since_seq + leaves.length leaves. Appending keeps the stack a compact range
 * (a new leaf merges with equal-sized subtrees on top); the root folds it from the right. No
 * subtree and no leaf: the empty tree's root.
 */
export function rootFromRange(range: readonly RangeNode[], leaves: Iterable<Buffer>): Buffer {
  const stack: { level: number; hash: Buffer }[] = range.map((n) => ({ level: n.level, hash: Buffer.from(n.hash, 'hex') }));
  for (const leaf of leaves) {
    let top = { level: 0, hash: leaf };
    while (stack.length > 0 && stack[stack.length - 1]!.level === top.level) {
      const left = stack.pop()!;
      top = { level: top.level + 1, hash: nodeHash(left.hash, top.hash) };
    }
    stack.push(top);
  }
  if (stack.length === 0) return EMPTY_ROOT;
  let root = stack[stack.length - 1]!.hash;
  for (let i = stack.length - 2; i >= 0; i--) root = nodeHash(stack[i]!.hash, root);
  return root;
}
