import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { fromKvToken, kvToken } from '../../src/nats/kv-key.js';
import { RevisionMap } from '../../src/nats/revision-map.js';

/** What NATS KV accepts as a key (the client's own check, @nats-io/kv validateKey). */
const VALID_KEY = /^[-/=.\w]+$/;

describe('kvToken', () => {
  it('keeps slugs and hex hashes readable, and encodes anything else after a `=`', () => {
    expect(kvToken('acme')).toBe('acme');
    expect(kvToken('a'.repeat(64))).toBe('a'.repeat(64));
    expect(kvToken('Dev@Example.com')).toBe('=' + Buffer.from('Dev@Example.com').toString('base64url'));
    expect(kvToken('triage.helper:v2')).toMatch(/^=[A-Za-z0-9_-]+$/);
    expect(kvToken('')).toBe('=');
  });

  it('is one to one, reversible, and always one valid key token (no dots)', () => {
    const text = fc.oneof(fc.string(), fc.string({ unit: 'grapheme' }), fc.stringMatching(/^[A-Za-z0-9_=.-]{0,12}$/));
    fc.assert(
      fc.property(text, text, (a, b) => {
        const token = kvToken(a);
        expect(token).toMatch(VALID_KEY);
        expect(token).not.toContain('.');
        expect(fromKvToken(token)).toBe(a);
        if (a !== b) expect(kvToken(b)).not.toBe(token);
      }),
    );
  });
});

describe('RevisionMap', () => {
  it('keeps the newest revision whatever the order: a late echo of an older write changes nothing', () => {
    const changes: [string, string | undefined, string | undefined][] = [];
    const map = new RevisionMap<string>((key, value, previous) => changes.push([key, value, previous]));
    expect(map.apply('k', 'v2', 7)).toBe(true); // the writer's ack
    expect(map.apply('k', 'v1', 5)).toBe(false); // the watch, still behind
    expect(map.apply('k', 'v2', 7)).toBe(false); // the echo of the same write
    expect(map.get('k')).toEqual({ value: 'v2', revision: 7 });
    expect(changes).toEqual([['k', 'v2', undefined]]);
  });

  it('keeps a delete as a tombstone: an older put cannot bring the key back, a newer one can', () => {
    const map = new RevisionMap<string>();
    map.apply('k', 'v', 3);
    expect(map.apply('k', undefined, 4)).toBe(true);
    expect(map.get('k')).toBeUndefined();
    expect(map.size).toBe(0);
    expect(map.apply('k', 'old', 3)).toBe(false);
    expect(map.get('k')).toBeUndefined();
    expect(map.apply('k', 'new', 9)).toBe(true);
    expect(map.get('k')).toEqual({ value: 'new', revision: 9 });
  });

  it('ends at the same state for any delivery order of the same changes, counting live keys', () => {
    const change = fc.record({ key: fc.constantFrom('a', 'b', 'c'), value: fc.option(fc.string(), { nil: undefined }) });
    fc.assert(
      fc.property(fc.array(change, { maxLength: 30 }).chain((cs) => fc.tuple(fc.constant(cs), fc.shuffledSubarray(cs.map((_, i) => i), { minLength: cs.length, maxLength: cs.length }))), ([changes, order]) => {
        const inOrder = new RevisionMap<string>();
        const shuffled = new RevisionMap<string>();
        changes.forEach((c, i) => inOrder.apply(c.key, c.value, i + 1));
        for (const i of order) shuffled.apply(changes[i]!.key, changes[i]!.value, i + 1);
        expect([...shuffled.values()].sort()).toEqual([...inOrder.values()].sort());
        expect(shuffled.size).toBe([...inOrder.values()].length);
      }),
    );
  });
});
