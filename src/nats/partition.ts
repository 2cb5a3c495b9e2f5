/**
 * Orgs to partitions (DESIGN §8): FNV-1a (32 bit) of the org slug's UTF-8 bytes, modulo the
 * cluster's partition count. Stable across nodes, processes and versions: the command router and
 * the partition leases must agree on it for the cluster's life, so never change it.
 */
export const DEFAULT_PARTITIONS = 64;

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
const utf8 = new TextEncoder();

export function fnv1a32(text: string): number {
  let hash = FNV_OFFSET;
  for (const byte of utf8.encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, FNV_PRIME) >>> 0;
  }
  return hash >>> 0;
}

/** The partition of `org`, in [0, partitions). */
export function partitionOf(org: string, partitions: number = DEFAULT_PARTITIONS): number {
  if (!Number.isInteger(partitions) || partitions < 1) throw new Error(`partitions must be a positive integer, not ${partitions}`);
  return fnv1a32(org) % partitions;
}
