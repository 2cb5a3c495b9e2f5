import { expect } from 'vitest';
import type { Stripe, StripeReader } from '../../src/domain/striped-tree.js';

/**
 * A striped tree's stored stripes kept in a map, as the LMDB table keeps them, for unit tests. It
 * counts the stripes read, and hands out both shapes StripeReader allows: the whole stripe for an
 * even slot, the hash alone for an odd one (a view into the stripe, or with `copyHashes` a Buffer
 * of its own, as a pair copied out of LMDB is).
 */
export class MapStripes implements StripeReader {
  readonly stripes = new Map<string, Buffer>();
  reads = 0;

  constructor(private readonly options: { copyHashes?: boolean } = {}) {}

  stripe(level: number, index: number): Buffer | undefined {
    this.reads++;
    return this.stripes.get(`${level}/${index}`);
  }

  holding(level: number, index: number, slot: number): Buffer | undefined {
    const stripe = this.stripe(level, index);
    if (slot % 2 === 0 || stripe === undefined) return stripe;
    const hash = stripe.subarray(slot * 32, slot * 32 + 32);
    return this.options.copyHashes === true ? Buffer.from(hash) : hash;
  }

  /** Stores filled stripes, checking each is new and comes after the one it follows. */
  put(filled: readonly Stripe[]): void {
    for (const s of filled) {
      expect(this.stripes.has(`${s.level}/${s.index}`), `stripe ${s.level}/${s.index} stored twice`).toBe(false);
      if (s.index > 0) expect(this.stripes.has(`${s.level}/${s.index - 1}`), `stripe ${s.level}/${s.index} before the one it follows`).toBe(true);
      this.stripes.set(`${s.level}/${s.index}`, Buffer.from(s.bytes));
    }
  }
}
