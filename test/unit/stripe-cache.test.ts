import { describe, expect, it } from 'vitest';
import { StripeCache } from '../../src/domain/stripe-cache.js';

describe('the stripe cache', () => {
  it('keeps stripes up to its budget, dropping the one put in longest ago', () => {
    const cache = new StripeCache(3 * 100);
    for (const [i, c] of ['a', 'b', 'c'].entries()) cache.put('acme', 1, i, Buffer.alloc(100, c));
    expect(cache.size).toBe(300);
    expect(cache.get('acme', 1, 0)?.[0]).toBe('a'.charCodeAt(0));
    cache.get('acme', 1, 0); // a hit does not make it younger
    cache.put('beta', 2, 0, Buffer.alloc(100, 'd'));
    expect(cache.size).toBe(300);
    expect([cache.get('acme', 1, 0), cache.get('acme', 1, 1), cache.get('acme', 1, 2), cache.get('beta', 2, 0)].map((s) => s !== undefined)).toEqual([false, true, true, true]);
  });

  it("gives each org's stripes as a table its reader holds, kept current", () => {
    const cache = new StripeCache(1000);
    const table = cache.of('acme');
    cache.put('acme', 3, 7, Buffer.alloc(100, 9));
    expect(table[3]?.[7]?.[0]).toBe(9);
    cache.drop('acme');
    expect(table[3]?.[7]).toBeUndefined();
    cache.put('acme', 3, 7, Buffer.alloc(100, 8));
    expect(table[3]?.[7]?.[0]).toBe(8);
  });

  it('keeps the first of a stripe put twice, and nothing larger than its budget', () => {
    const cache = new StripeCache(100);
    cache.put('acme', 1, 0, Buffer.alloc(100, 1));
    cache.put('acme', 1, 0, Buffer.alloc(100, 2));
    expect(cache.get('acme', 1, 0)?.[0]).toBe(1);
    cache.put('acme', 1, 1, Buffer.alloc(101));
    expect(cache.get('acme', 1, 1)).toBeUndefined();
    expect(cache.size).toBe(100);
    const none = new StripeCache(0);
    none.put('acme', 1, 0, Buffer.alloc(1));
    expect(none.get('acme', 1, 0)).toBeUndefined();
  });

  it("forgets an org's stripes (not another's whose name it starts), and their bytes; a stripe put again after is kept to the budget", () => {
    const cache = new StripeCache(300);
    for (const org of ['acme', 'acme2', 'beta']) cache.put(org, 1, 0, Buffer.alloc(100));
    cache.put('acme', 2, 0, Buffer.alloc(100)); // evicts acme 1/0
    cache.drop('acme');
    expect(['acme', 'acme2', 'beta'].map((org) => cache.get(org, 1, 0) !== undefined)).toEqual([false, true, true]);
    expect(cache.get('acme', 2, 0)).toBeUndefined();
    expect(cache.size).toBe(200);
    cache.put('acme', 1, 0, Buffer.alloc(100));
    cache.put('gamma', 1, 0, Buffer.alloc(100));
    expect(cache.size).toBe(300);
  });

  it('holds to its budget over many puts (the order of puts is reclaimed as it goes)', () => {
    const cache = new StripeCache(10 * 100);
    for (let i = 0; i < 5000; i++) cache.put(`org${i % 7}`, 1 + (i % 3), i, Buffer.alloc(100));
    expect(cache.size).toBe(1000);
    expect(cache.get(`org${4999 % 7}`, 1 + (4999 % 3), 4999)).toBeDefined();
    expect(cache.get('org0', 1, 0)).toBeUndefined();
  });
});
