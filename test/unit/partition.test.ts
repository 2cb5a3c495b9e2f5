import { describe, expect, it } from 'vitest';
import { DEFAULT_PARTITIONS, fnv1a32, partitionOf } from '../../src/nats/partition.js';

describe('partitionOf', () => {
  it('is FNV-1a 32 of the UTF-8 bytes (published test vectors), so every node and version agrees', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  it('maps an org to [0, partitions), 64 by default, and spreads orgs over them', () => {
    expect(DEFAULT_PARTITIONS).toBe(64);
    expect(partitionOf('acme')).toBe(fnv1a32('acme') % 64);
    const seen = new Set(Array.from({ length: 2000 }, (_, i) => partitionOf(`org-${i}`)));
    expect(seen.size).toBe(64);
    expect(partitionOf('acme', 1)).toBe(0);
  });

  it('refuses a partition count that is not a positive integer', () => {
    expect(() => partitionOf('acme', 0)).toThrow('positive integer');
    expect(() => partitionOf('acme', 2.5)).toThrow('positive integer');
  });
});
