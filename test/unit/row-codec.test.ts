import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bodyIsReadable, makeRow, sha256, type LedgerRow } from '../../src/domain/ledger.js';
import { decodeRow, encodeRow } from '../../src/store/row-codec.js';

describe('stored row codec', () => {
  it('round-trips any row, including non-ASCII text and a null agent', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 1e9 }),
        fc.constantFrom('event', 'agent', 'review', 'export'),
        fc.option(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 128 }), { nil: null }),
        fc.jsonValue(),
        (seq, kind, agentId, body) => {
          const row = makeRow(sha256(String(seq)), seq + 1, kind, '2026-11-22T00:00:00.000Z', agentId, body);
          const stored = encodeRow(row);
          const back = decodeRow(row.seq, stored);
          const fields = (r: LedgerRow) => [r.seq, r.kind, r.recordedAt, r.agentId, r.bodyJson, r.contentHash, r.prevHash, r.chainHash];
          expect(fields(back)).toEqual(fields(row));
          // From a larger reused buffer (LMDB's read buffer): only `size` bytes count, and the
          // row keeps nothing of the buffer once it is overwritten.
          const shared = Buffer.alloc(stored.length + 64, 0x7b);
          stored.copy(shared);
          const fromShared = decodeRow(row.seq, shared, stored.length);
          shared.fill(0);
          expect(fields(fromShared)).toEqual(fields(row));
        },
      ),
    );
  });

  it('reads bytes it cannot decode (an unknown layout version, a truncated row) as an unreadable row, never throwing', () => {
    const buf = encodeRow(makeRow(sha256('x'), 1, 'event', '2026-11-22T00:00:00.000Z', 'a', {}));
    const flipped = Buffer.from(buf);
    flipped[0] = 9;
    for (const bytes of [flipped, buf.subarray(0, 99), buf.subarray(0, 105)]) {
      const row = decodeRow(1, bytes);
      expect(row.seq).toBe(1);
      expect(bodyIsReadable(row)).toBe(false);
    }
    expect(bodyIsReadable(decodeRow(1, buf))).toBe(true);
  });
});
