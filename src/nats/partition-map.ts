import { fnv1a32 } from './partition.js';

/**
 * The partition map a client reads (`GET /cluster/map`): how orgs hash to partitions and which
 * node's base URL owns each one now. Advisory: the owner may change at any time, and a request
 * sent to any node is still forwarded to the owner; the map only saves that hop.
 */
export interface PartitionMap {
  /** Orgs hash to this many partitions (VIGIL_PARTITIONS; 1 in embedded mode). */
  partitions: number;
  /** The hash: FNV-1a (32 bit) of the org slug's UTF-8 bytes, modulo `partitions`. */
  hash: 'fnv1a32';
  /** Per partition, its owner's base URL, or null while it has none (a lease moving) or it is unknown. */
  owners: (string | null)[];
  /**
   * Changes whenever `owners` does (a digest of it, the same on every node that sees the same
   * owners): a client compares it to the one it holds rather than the whole list.
   */
  version: string;
}

export function partitionMap(owners: readonly (string | null)[]): PartitionMap {
  return { partitions: owners.length, hash: 'fnv1a32', owners: [...owners], version: fnv1a32(JSON.stringify(owners)).toString(16).padStart(8, '0') };
}
