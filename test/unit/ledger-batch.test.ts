import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { LAYOUT_SLOTS, RowBatch, type Sha256Many } from '../../src/domain/ledger-batch.js';
import { ChainVerifier, GENESIS_HASH, makeRow, type LedgerRow } from '../../src/domain/ledger.js';
import { nativeSha256Many } from '../../src/store/batch-hash.js';
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
});
