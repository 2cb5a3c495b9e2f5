import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../src/domain/jcs.js';

describe('canonicalize (RFC 8785)', () => {
  describe('object key order: UTF-16 code units', () => {
    it('sorts the brief key set by code unit, not code point or locale', () => {
      const input = {
        '\u20ac': 'Euro Sign',
        '\r': 'Carriage Return',
        '\ud83d\ude00': 'Emoji: Grinning Face',
        '1': 'One',
        'é': 'Latin Small Letter E With Acute',
        A: 'Capital A',
        a: 'Small a',
      };
      expect(canonicalize(input)).toBe(
        '{"\\r":"Carriage Return","1":"One","A":"Capital A","a":"Small a",' +
          '"é":"Latin Small Letter E With Acute","€":"Euro Sign","😀":"Emoji: Grinning Face"}',
      );
    });

    it('matches the RFC 8785 §3.2.3 sorting example', () => {
      const input = JSON.parse(
        '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One",' +
          '"\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}',
      ) as unknown;
      // Object.keys would put "1" first regardless, so check the order of the keys in the text.
      const text = canonicalize(input);
      const order = ['\r', '1', '\u0080', '\u00f6', '\u20ac', '\ud83d\ude00', '\ufb33'].map((k) =>
        text.indexOf(JSON.stringify(k) + ':'),
      );
      expect(order.every((pos) => pos > 0)).toBe(true);
      expect([...order].sort((x, y) => x - y)).toEqual(order);
    });

    it('orders a supplementary-plane key (surrogate pair) before U+FB33 even though its code point is higher', () => {
      expect(canonicalize({ '\ufb33': 1, '\ud83d\ude00': 2 })).toBe('{"😀":2,"דּ":1}');
    });

    it('orders integer-like keys as strings ("10" before "2")', () => {
      expect(canonicalize({ 2: 'b', 10: 'a', 1: 'c' })).toBe('{"1":"c","10":"a","2":"b"}');
    });
  });

  describe('numbers: ECMAScript shortest round-trip form', () => {
    const cases: [number, string][] = [
      [1e21, '1e+21'],
      [1e20, '100000000000000000000'],
      [1e-7, '1e-7'],
      [0.000001, '0.000001'],
      [-0, '0'],
      [0, '0'],
      [0.30000000000000004, '0.30000000000000004'],
      [100, '100'],
      [-1.5, '-1.5'],
      [4.5, '4.5'],
      [333333333.33333329, '333333333.3333333'],
      [1e30, '1e+30'],
      [2e-3, '0.002'],
      [1e-27, '1e-27'],
      [5e-324, '5e-324'],
      [Number.MAX_VALUE, '1.7976931348623157e+308'],
      [Number.MAX_SAFE_INTEGER, '9007199254740991'],
      [-1e-7, '-1e-7'],
    ];
    for (const [value, expected] of cases) {
      it(`${String(value)} → ${expected}`, () => {
        expect(canonicalize(value)).toBe(expected);
      });
    }

    it('-0 inside structures is written as 0', () => {
      expect(canonicalize({ a: -0, b: [-0] })).toBe('{"a":0,"b":[0]}');
    });

    it('throws on non-finite numbers, also when nested', () => {
      for (const bad of [NaN, Infinity, -Infinity, { a: NaN }, [1, Infinity], { a: { b: [-Infinity] } }]) {
        expect(() => canonicalize(bad)).toThrow(TypeError);
      }
    });
  });

  describe('strings', () => {
    it('escapes quotes and backslash, not "/"', () => {
      expect(canonicalize('say "hi" \\ / ok')).toBe('"say \\"hi\\" \\\\ / ok"');
    });

    it('uses the short escapes \\b \\t \\n \\f \\r and lowercase \\u00XX for other controls', () => {
      expect(canonicalize('\b\t\n\f\r')).toBe('"\\b\\t\\n\\f\\r"');
      expect(canonicalize('\u0000\u0001\u000f\u001f')).toBe('"\\u0000\\u0001\\u000f\\u001f"');
    });

    it('leaves U+2028, U+2029, DEL and non-ASCII characters unescaped', () => {
      expect(canonicalize('a\u2028b\u2029c\u007fd€😀é')).toBe('"a\u2028b\u2029c\u007fd€😀é"');
    });

    it('matches the RFC 8785 §3.2.2 example as a whole', () => {
      const input = JSON.parse(
        '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],' +
          '"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
      ) as unknown;
      expect(canonicalize(input)).toBe(
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' +
          '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
      );
    });
  });

  describe('structures', () => {
    it('sorts nested objects and keeps array order', () => {
      const input = { b: [{ d: 1, c: [] }, {}, [3, 2, 1]], a: { z: null, y: {}, x: 'x' } };
      expect(canonicalize(input)).toBe('{"a":{"x":"x","y":{},"z":null},"b":[{"c":[],"d":1},{},[3,2,1]]}');
    });

    it('writes literals and empty containers without whitespace', () => {
      expect(canonicalize(null)).toBe('null');
      expect(canonicalize(true)).toBe('true');
      expect(canonicalize(false)).toBe('false');
      expect(canonicalize([])).toBe('[]');
      expect(canonicalize({})).toBe('{}');
      expect(canonicalize([null, true, false, 'x', 1, [], {}])).toBe('[null,true,false,"x",1,[],{}]');
    });

    it('skips undefined object members, as JSON.stringify does', () => {
      expect(canonicalize({ a: undefined, b: 1 })).toBe('{"b":1}');
      expect(canonicalize({ b: 1, a: undefined })).toBe('{"b":1}');
      expect(canonicalize({ a: undefined })).toBe('{}');
      expect(canonicalize({ a: { b: undefined, c: 2 } })).toBe('{"a":{"c":2}}');
    });

    it('writes undefined array items as null, as JSON.stringify does', () => {
      expect(canonicalize([undefined, 1])).toBe('[null,1]');
    });

    it('refuses values JSON cannot represent', () => {
      expect(() => canonicalize(undefined)).toThrow(TypeError);
      expect(() => canonicalize(10n)).toThrow(TypeError);
      expect(() => canonicalize(Symbol('s'))).toThrow(TypeError);
    });
  });

  describe('properties', () => {
    it('is idempotent through JSON.parse', () => {
      fc.assert(
        fc.property(fc.jsonValue(), (x) => {
          const once = canonicalize(x);
          expect(canonicalize(JSON.parse(once))).toBe(once);
        }),
        { numRuns: 500 },
      );
    });

    it('parses back to the same JSON value', () => {
      fc.assert(
        fc.property(fc.jsonValue(), (x) => {
          expect(JSON.parse(canonicalize(x))).toStrictEqual(JSON.parse(JSON.stringify(x)));
        }),
        { numRuns: 500 },
      );
    });

    it('is independent of object key insertion order', () => {
      const reverseKeys = (v: unknown): unknown => {
        if (Array.isArray(v)) return v.map(reverseKeys);
        if (v !== null && typeof v === 'object') {
          const out: Record<string, unknown> = {};
          for (const key of Object.keys(v).reverse()) {
            Object.defineProperty(out, key, {
              value: reverseKeys((v as Record<string, unknown>)[key]),
              enumerable: true,
              writable: true,
              configurable: true,
            });
          }
          return out;
        }
        return v;
      };
      fc.assert(
        fc.property(fc.jsonValue(), (x) => {
          expect(canonicalize(reverseKeys(x))).toBe(canonicalize(x));
        }),
        { numRuns: 300 },
      );
    });

    it('agrees with JSON.stringify on values without objects (no key order involved)', () => {
      const noObjects = fc.letrec((tie) => ({
        value: fc.oneof(
          { depthSize: 'small', maxDepth: 3 },
          fc.constant(null),
          fc.boolean(),
          fc.double({ noNaN: true, noDefaultInfinity: true }),
          fc.string({ unit: 'grapheme' }),
          fc.string({ unit: 'binary' }),
          fc.array(tie('value'), { maxLength: 6 }),
        ),
      })).value;
      fc.assert(
        fc.property(noObjects, (x) => {
          expect(canonicalize(x)).toBe(JSON.stringify(x));
        }),
        { numRuns: 300 },
      );
    });
  });
});
