import { fnv1a32 } from './partition.js';

/**
 * How partitions are shared out among live nodes (DESIGN §8): pure functions of their inputs, so
 * every node computes the same shares from the same view.
 */

/** A node's fair share: ceil(partitions / live nodes), so the shares always cover every partition. */
export function fairShare(partitions: number, liveNodes: number): number {
  return Math.ceil(partitions / Math.max(1, liveNodes));
}

/**
 * A holder's order of preference over the partitions, by rendezvous hashing: each partition ranked
 * by FNV-1a of `<holder>#<partition>`. Holders are random, so two nodes' orders are unrelated and
 * they seldom race for the same free partition; a node claims from the front and releases from the
 * back of its own order.
 */
export function preferenceOrder(holder: string, partitions: number): number[] {
  const scored = Array.from({ length: partitions }, (_, p) => ({ p, score: fnv1a32(`${holder}#${p}`) }));
  scored.sort((a, b) => b.score - a.score || a.p - b.p);
  return scored.map((s) => s.p);
}
