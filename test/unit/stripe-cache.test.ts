import { describe, expect, it } from 'vitest';
import { StripeCache } from '../../src/domain/stripe-cache.js';

describe('the stripe cache', () => {
  it('keeps stripes up to its budget, dropping the one put in longest ago', () => {
    const cache = new StripeCache(3 * 100);
    for (const key of ['a', 'b', 'c']) cache.put(key, Buffer.alloc(100, key));
    expect(cache.size).toBe(300);
    expect(cache.get('a')?.[0]).toBe('a'.charCodeAt(0));
    cache.get('a'); // a hit does not make it younger
    cache.put('d', Buffer.alloc(100, 'd'));
    expect(cache.size).toBe(300);
    expect(['a', 'b', 'c', 'd'].map((k) => cache.get(k) !== undefined)).toEqual([false, true, true, true]);
  });

  it('keeps the first of a key put twice, and nothing larger than its budget', () => {
    const cache = new StripeCache(100);
    cache.put('a', Buffer.alloc(100, 1));
    cache.put('a', Buffer.alloc(100, 2));
    expect(cache.get('a')?.[0]).toBe(1);
    cache.put('big', Buffer.alloc(101));
    expect(cache.get('big')).toBeUndefined();
    expect(cache.size).toBe(100);
    const none = new StripeCache(0);
    none.put('a', Buffer.alloc(1));
    expect(none.get('a')).toBeUndefined();
  });

  it('forgets an org\'s stripes by key prefix, and their bytes', () => {
    const cache = new StripeCache(1000);
    for (const key of ['acme\u00001/0', 'acme\u00002/0', 'acme2\u00001/0', 'beta\u00001/0']) cache.put(key, Buffer.alloc(100));
    cache.drop('acme\u0000');
    expect(['acme\u00001/0', 'acme\u00002/0', 'acme2\u00001/0', 'beta\u00001/0'].map((k) => cache.get(k) !== undefined)).toEqual([false, false, true, true]);
    expect(cache.size).toBe(200);
  });
});
