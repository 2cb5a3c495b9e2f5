/**
 * Full stripes of the tree levels just above the leaves (1 to HELD_LEVEL − 1), kept in memory for
 * every org together up to a byte budget (VIGIL_TREE_CACHE_MB), so that a proof reads only its
 * leaf's stripe from storage. Those levels hold 28 bytes a record (28 MB for a million); past the
 * budget the stripe put in longest ago goes first. No bookkeeping on a hit: a proof's path is
 * random, so recency would buy little over insertion order.
 */
export class StripeCache {
  private readonly stripes = new Map<string, Buffer>();
  private bytes = 0;

  constructor(readonly maxBytes: number) {}

  get(key: string): Buffer | undefined {
    return this.stripes.get(key);
  }

  /** Keeps `stripe` (which must not change) under `key`, dropping the oldest past the budget. */
  put(key: string, stripe: Buffer): void {
    if (stripe.length > this.maxBytes || this.stripes.has(key)) return;
    this.stripes.set(key, stripe);
    this.bytes += stripe.length;
    for (const [oldest, kept] of this.stripes) {
      if (this.bytes <= this.maxBytes) break;
      this.stripes.delete(oldest);
      this.bytes -= kept.length;
    }
  }

  /** Forgets every stripe whose key starts with `prefix` (an org's, when its tree is rebuilt). */
  drop(prefix: string): void {
    for (const [key, stripe] of this.stripes) {
      if (!key.startsWith(prefix)) continue;
      this.stripes.delete(key);
      this.bytes -= stripe.length;
    }
  }

  /** Bytes held. */
  get size(): number {
    return this.bytes;
  }
}
