import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/http/rate-limit.js';

describe('RateLimiter', () => {
  it('allows `limit` requests in a window, then denies with remaining 0', () => {
    const limiter = new RateLimiter(3, 1000);
    const t0 = 1_000_000;
    const decisions = [0, 10, 20, 30, 40].map((dt) => limiter.take('client-a', t0 + dt));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false, false]);
    expect(decisions.map((d) => d.remaining)).toEqual([2, 1, 0, 0, 0]);
    for (const d of decisions) {
      expect(d.limit).toBe(3);
      expect(d.resetSeconds).toBeGreaterThanOrEqual(1);
    }
  });

  it('takes a cost (events) at once, all or nothing: a refused take counts nothing, so a smaller one still fits', () => {
    const limiter = new RateLimiter(5, 1000);
    expect(limiter.take('c', 0, 3)).toMatchObject({ allowed: true, remaining: 2 });
    expect(limiter.take('c', 1, 3)).toMatchObject({ allowed: false, remaining: 2 });
    expect(limiter.take('c', 2, 2)).toMatchObject({ allowed: true, remaining: 0 });
    expect(limiter.take('c', 3)).toMatchObject({ allowed: false, remaining: 0 });
    expect(limiter.take('c', 1000, 5)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('takes more than the limit only from an empty window, which it then holds for as many windows as it fills', () => {
    const limiter = new RateLimiter(5, 1000);
    limiter.take('c', 0, 1);
    expect(limiter.take('c', 10, 12)).toMatchObject({ allowed: false, resetSeconds: 1 });
    expect(limiter.take('c', 1000, 12)).toMatchObject({ allowed: true, remaining: 0, resetSeconds: 3 });
    expect(limiter.take('c', 3999, 1)).toMatchObject({ allowed: false, resetSeconds: 1 });
    expect(limiter.take('c', 4000, 1)).toMatchObject({ allowed: true, remaining: 4 });
  });

  it('starts a new window once windowMs has passed', () => {
    const limiter = new RateLimiter(3, 1000);
    const t0 = 5_000;
    for (let i = 0; i < 4; i++) limiter.take('c', t0 + i);
    expect(limiter.take('c', t0 + 999).allowed).toBe(false);
    const fresh = limiter.take('c', t0 + 1000);
    expect(fresh.allowed).toBe(true);
    expect(fresh.remaining).toBe(2);
    expect(fresh.resetSeconds).toBe(1);
  });

  it('keeps clients independent', () => {
    const limiter = new RateLimiter(1, 1000);
    expect(limiter.take('a', 0).allowed).toBe(true);
    expect(limiter.take('a', 1).allowed).toBe(false);
    expect(limiter.take('b', 2).allowed).toBe(true);
  });

  it('reports resetSeconds as the whole seconds left in the window, at least 1', () => {
    const limiter = new RateLimiter(10, 60_000);
    expect(limiter.take('c', 0).resetSeconds).toBe(60);
    expect(limiter.take('c', 30_500).resetSeconds).toBe(30);
    expect(limiter.take('c', 59_999).resetSeconds).toBe(1);
  });

  it('resetSeconds is always >= 1 and remaining never negative, for any request times', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c'), fc.integer({ min: 0, max: 3000 })), { maxLength: 50 }),
        (limit, windowMs, steps) => {
          const limiter = new RateLimiter(limit, windowMs);
          let now = 0;
          for (const [client, dt] of steps) {
            now += dt;
            const d = limiter.take(client, now);
            expect(d.resetSeconds).toBeGreaterThanOrEqual(1);
            expect(d.resetSeconds).toBeLessThanOrEqual(Math.max(1, Math.ceil(windowMs / 1000)));
            expect(d.remaining).toBeGreaterThanOrEqual(0);
            expect(d.remaining).toBeLessThanOrEqual(limit - 1);
            if (!d.allowed) expect(d.remaining).toBe(0);
          }
        },
      ),
    );
  });

  it('matches a fixed-window reference model for a single client', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 2000 }),
        fc.array(fc.integer({ min: 0, max: 1500 }), { maxLength: 60 }),
        (limit, windowMs, gaps) => {
          const limiter = new RateLimiter(limit, windowMs);
          let now = 0;
          let start = -Infinity;
          let count = 0;
          for (const gap of gaps) {
            now += gap;
            if (now - start >= windowMs) {
              start = now;
              count = 0;
            }
            count++;
            const d = limiter.take('c', now);
            expect(d.allowed).toBe(count <= limit);
            expect(d.remaining).toBe(Math.max(0, limit - count));
          }
        },
      ),
    );
  });

  it('allows at most 2 × limit requests in any span shorter than the window', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 400 }), { maxLength: 80 }), (gaps) => {
        const limiter = new RateLimiter(3, 1000);
        let now = 0;
        const allowedAt: number[] = [];
        for (const gap of gaps) {
          now += gap;
          if (limiter.take('c', now).allowed) allowedAt.push(now);
        }
        for (const t of allowedAt) {
          expect(allowedAt.filter((u) => u >= t && u < t + 1000).length).toBeLessThanOrEqual(6);
        }
      }),
    );
  });

  it('bounds memory: with maxClients 10, 1000 clients keep size <= 10', () => {
    const limiter = new RateLimiter(3, 1000, 10);
    for (let i = 0; i < 1000; i++) {
      limiter.take(`client-${i}`, i);
      expect(limiter.size).toBeLessThanOrEqual(10);
    }
    expect(limiter.size).toBeGreaterThan(0);
  });

  it('an evicted client starts a fresh window', () => {
    const limiter = new RateLimiter(1, 60_000, 2);
    expect(limiter.take('old', 0).allowed).toBe(true);
    expect(limiter.take('old', 1).allowed).toBe(false);
    limiter.take('x', 2);
    limiter.take('y', 3); // full: evicts the oldest window ('old')
    expect(limiter.size).toBeLessThanOrEqual(2);
    expect(limiter.take('old', 4).allowed).toBe(true);
  });
});
