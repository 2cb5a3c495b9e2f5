import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chainRows, LAYOUT_SLOTS, RowBatch, type RowDraft, type Sha256Rows, type Sha256Many } from '../../src/domain/ledger-batch.js';
import { canonicalize } from '../../src/domain/jcs.js';
import { ChainVerifier, GENESIS_HASH, makeRow, rowLeafHash, type LedgerRow } from '../../src/domain/ledger.js';
import { nativeSha256Rows, nativeSha256Many } from '../../src/store/batch-hash.js';
import { encodeRow, readLayout } from '../../src/store/row-codec.js';

/** The batch contract implemented with node:crypto, one message at a time. */
const cryptoSha256Many: Sha256Many = (data, ends, out) => {
  let start = 0;
  ends.forEach((end, i) => {
    createHash('sha256').update(data.subarray(start, end)).digest().copy(out, 32 * i);
    start = end;
  });
};

function chain(n: number): LedgerRow[] {
  const rows: LedgerRow[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const row = makeRow(prev, seq, 'event', '2026-11-22T00:00:00.000Z', seq % 2 ? 'a' : null, { seq, text: 'é😀\u2028'.repeat(seq % 5) });
    rows.push(row);
    prev = row.chainHash;
  }
  return rows;
}

describe('RowBatch', () => {
  const verifyStored = (rows: LedgerRow[], size = 64) => {
    const verifier = new ChainVerifier();
    const batch = new RowBatch(cryptoSha256Many, verifier, size);
    const layout = new Int32Array(LAYOUT_SLOTS);
    for (const row of rows) {
      const stored = encodeRow(row);
      readLayout(stored, layout);
      batch.add(row.seq, stored, layout);
      stored.fill(0); // the batch must have copied what it needs
    }
    batch.flush();
    return verifier.report();
  };

  it('verifies stored rows from their bytes, across batch boundaries, as the decoded path does', () => {
    const rows = chain(300);
    expect(verifyStored(rows)).toEqual({ ok: true, head: rows.at(-1)!.chainHash.toString('hex'), length: 300, first_bad_seq: null, problem: null });
  });

  it('takes the escaping path for fields JSON must escape', () => {
    let prev = GENESIS_HASH;
    const rows = ['plain', 'quote"d', 'back\\slash', 'tab\there', 'ünï'].map((agent, i) => {
      const row = makeRow(prev, i + 1, 'event', '2026-11-22T00:00:00.000Z', agent, { i });
      prev = row.chainHash;
      return row;
    });
    expect(verifyStored(rows, 2).ok).toBe(true);
  });

  it('names the first tampered row', () => {
    const rows = chain(50);
    rows[31] = { ...rows[31]!, bodyJson: rows[31]!.bodyJson.replace('"seq":32', '"seq":33') };
    expect(verifyStored(rows, 16)).toMatchObject({ ok: false, first_bad_seq: 32, problem: 'content_hash does not match the record' });
  });
});

describe('native batch SHA-256', () => {
  const requireNative = process.env.CI === 'true';
  if (nativeSha256Many === null) {
    console.warn('\n!!! native batch SHA-256 (src/native) is not built: its test is SKIPPED\n');
    if (requireNative) throw new Error('the native batch SHA-256 must be built in CI');
  }
  it.skipIf(nativeSha256Many === null)('native batch SHA-256 equals node:crypto, for any sizes', () => {
    const sizes = [0, 1, 55, 56, 63, 64, 65, 119, 120, 450, 4096];
    const data = Buffer.alloc(sizes.reduce((a, b) => a + b, 0));
    for (let i = 0; i < data.length; i++) data[i] = (i * 31 + 7) & 0xff;
    const ends = new Uint32Array(sizes.length);
    sizes.reduce((at, size, i) => (ends[i] = at + size), 0);
    const a = Buffer.alloc(32 * sizes.length);
    const b = Buffer.alloc(32 * sizes.length);
    nativeSha256Many!(data, ends, a);
    cryptoSha256Many(data, ends, b);
    expect(a.equals(b)).toBe(true);
    expect(() => nativeSha256Many!(data, new Uint32Array([5, 2]), a)).toThrow(/increasing/);
  });
  it.skipIf(nativeSha256Rows === null)('native chain hashing refuses bad arguments', () => {
    const data = Buffer.alloc(10);
    expect(() => nativeSha256Rows!(Buffer.alloc(31), data, new Uint32Array([5]), Buffer.alloc(64))).toThrow(/32 bytes/);
    expect(() => nativeSha256Rows!(Buffer.alloc(32), data, new Uint32Array([5, 11]), Buffer.alloc(128))).toThrow(/increasing/);
    expect(() => nativeSha256Rows!(Buffer.alloc(32), data, new Uint32Array([5, 6]), Buffer.alloc(64))).toThrow(/too small/);
    // prev may be a view of out (it is read before out is written).
    const out = Buffer.alloc(192);
    const prev = Buffer.alloc(32, 9);
    prev.copy(out);
    nativeSha256Rows!(out.subarray(0, 32), data, new Uint32Array([4, 10]), out);
    const expected = Buffer.alloc(192);
    nativeSha256Rows!(prev, data, new Uint32Array([4, 10]), expected);
    expect(out.equals(expected)).toBe(true);
  });
});

describe('chainRows (the writer hashes a batch at once)', () => {
  /** The chain contract implemented with node:crypto. */
  const cryptoSha256Rows: Sha256Rows = (prev, data, ends, out) => {
    let start = 0;
    let chain = prev;
    ends.forEach((end, i) => {
      const content = createHash('sha256').update(data.subarray(start, end)).digest();
      chain = createHash('sha256').update(chain).update(content).digest();
      content.copy(out, 96 * i);
      chain.copy(out, 96 * i + 32);
      createHash('sha256').update(Buffer.from([0])).update(data.subarray(start, end)).digest().copy(out, 96 * i + 64);
      start = end;
    });
  };
  const hashers: [string, Sha256Rows | null][] = [
    ['node:crypto row by row', null],
    ['a batch hasher', cryptoSha256Rows],
    ...(nativeSha256Rows === null ? [] : ([['the native batch hasher', nativeSha256Rows]] as [string, Sha256Rows][])),
  ];
  const draft = fc.record({
    kind: fc.constantFrom('event', 'agent', 'review', 'export'),
    agentId: fc.option(fc.string({ unit: 'grapheme', maxLength: 12 }), { nil: null }),
    body: fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), fc.integer(), fc.boolean())),
  });

  it.each(hashers)('builds the rows makeRow builds, batch after batch, with %s', (_, hasher) => {
    fc.assert(
      fc.property(fc.array(fc.array(draft, { maxLength: 40 }), { maxLength: 4 }), (batches) => {
        let prev = GENESIS_HASH;
        let seq = 1;
        for (const batch of batches) {
          const drafts: RowDraft[] = batch.map((d) => ({ ...d, recordedAt: '2026-11-23T00:00:00.000Z', bodyJson: canonicalize(d.body) }));
          const rows = chainRows(prev, seq, drafts, hasher);
          for (const row of rows) {
            const expected = makeRow(prev, seq++, row.kind, row.recordedAt, row.agentId, row.body);
            const { leafHash, ...rest } = row;
            expect(rest).toEqual(expected);
            // The batch hashers make the Merkle leaf hash with the others (DESIGN §10).
            if (hasher !== null) expect(leafHash).toEqual(rowLeafHash(expected));
            prev = row.chainHash;
          }
        }
      }),
      { numRuns: 60 },
    );
  });

  it.each(hashers)('grows its scratch for large batches and bodies, with %s', (_, hasher) => {
    // One body of 3-byte UTF-8 characters past the scratch kept between batches (1 MB), so every
    // case starts from a small scratch and grows it.
    const drafts: RowDraft[] = Array.from({ length: 700 }, (_, i) => {
      const body = { i, text: i === 3 ? '€'.repeat(400_000) : i === 5 ? 'é😀'.repeat(20_000) : 'é😀'.repeat(20) };
      return { kind: 'event', recordedAt: '2026-11-23T00:00:00.000Z', agentId: `a${i % 7}`, bodyJson: canonicalize(body), body };
    });
    const rows = chainRows(GENESIS_HASH, 1, drafts, hasher);
    const verifier = new ChainVerifier();
    for (const row of rows) verifier.push(row);
    expect(verifier.report()).toMatchObject({ ok: true, length: 700 });
    for (const i of [3, 4, 5, 699]) {
      const expected = makeRow(rows[i - 1]!.chainHash, i + 1, 'event', drafts[i]!.recordedAt, `a${i % 7}`, drafts[i]!.body);
      expect({ ...rows[i], leafHash: undefined }).toEqual(expected);
      if (hasher !== null) expect(rows[i]!.leafHash).toEqual(rowLeafHash(expected));
    }
  });
});
