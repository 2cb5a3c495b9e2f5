import { describe, expect, it } from 'vitest';
import { fairShare, preferenceOrder } from '../../src/nats/lease-plan.js';

describe('lease plan', () => {
  it('gives each live node ceil(partitions / nodes), so the shares cover every partition', () => {
    expect(fairShare(64, 1)).toBe(64);
    expect(fairShare(64, 2)).toBe(32);
    expect(fairShare(64, 3)).toBe(22);
    expect(fairShare(9, 2)).toBe(5);
    expect(fairShare(3, 5)).toBe(1);
    expect(fairShare(8, 0)).toBe(8); // no node seen: this node alone
  });

  it('orders the partitions per holder: every partition once, the same for the same holder, unrelated across holders', () => {
    const a = preferenceOrder('alpha:0123456789ab', 64);
    expect([...a].sort((x, y) => x - y)).toEqual(Array.from({ length: 64 }, (_, p) => p));
    expect(preferenceOrder('alpha:0123456789ab', 64)).toEqual(a);
    const b = preferenceOrder('alpha:ba9876543210', 64);
    expect(b).not.toEqual(a);
    // Two holders' first halves overlap about half as much as they could, not fully.
    const overlap = a.slice(0, 32).filter((p) => b.slice(0, 32).includes(p)).length;
    expect(overlap).toBeGreaterThan(4);
    expect(overlap).toBeLessThan(28);
  });
});
