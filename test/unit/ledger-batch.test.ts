import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { BatchHasher, type Sha256Many } from '../../src/domain/ledger-batch.js';
import { ChainVerifier, GENESIS_HASH, makeRow, type LedgerRow } from '../../src/domain/ledger.js';
import { nativeSha256Many } from '../../src/store/batch-hash.js';

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

describe('BatchHasher', () => {
  it('computes each row content hash and chain hash as the rule says', () => {
    const rows = chain(300);
    const computed = new BatchHasher(cryptoSha256Many).hash(rows);
    rows.forEach((row, i) => {
      expect(computed[i]!.content.equals(row.contentHash)).toBe(true);
      expect(computed[i]!.chain.equals(row.chainHash)).toBe(true);
    });
  });

  it('lets ChainVerifier find the first tampered row from precomputed hashes', () => {
    const rows = chain(50);
    rows[31] = { ...rows[31]!, bodyJson: rows[31]!.bodyJson.replace('"seq":32', '"seq":33') };
    const computed = new BatchHasher(cryptoSha256Many).hash(rows);
    const verifier = new ChainVerifier();
    rows.forEach((row, i) => verifier.push(row, computed[i]));
    expect(verifier.report()).toMatchObject({ ok: false, first_bad_seq: 32 });
  });

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
