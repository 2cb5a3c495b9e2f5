import { describe, expect, it } from 'vitest';
import { decodeBatch, encodeBatches, sameBatch, unpackBatch } from '../../src/nats/batch-codec.js';
import { encodeRow } from '../../src/store/row-codec.js';
import { chain } from '../contract/ledger-log.case.js';

/** One payload, however large. */
const encodeBatch = (rows: Parameters<typeof encodeBatches>[0]): Buffer => encodeBatches(rows, Number.MAX_SAFE_INTEGER)[0]!.payload;

describe('ledger batch codec (one JetStream message per batch)', () => {
  it('round-trips consecutive rows: seqs, fields and hashes', () => {
    const rows = chain(5).slice(2); // seqs 3..5
    const batch = unpackBatch(encodeBatch(rows));
    expect(batch.first).toBe(3);
    const decoded = decodeBatch(batch);
    expect(decoded.map((r) => r.seq)).toEqual([3, 4, 5]);
    decoded.forEach((row, i) => {
      const want = rows[i]!;
      expect([row.kind, row.recordedAt, row.agentId, row.bodyJson]).toEqual([want.kind, want.recordedAt, want.agentId, want.bodyJson]);
      expect(encodeRow(row).equals(encodeRow(want))).toBe(true);
    });
    expect(decodeBatch(batch, 5).map((r) => r.seq)).toEqual([5]);
    expect(decodeBatch(batch, 9)).toEqual([]);
  });

  it('refuses rows that are not consecutive, and payloads that are not batches', () => {
    const rows = chain(3);
    expect(() => encodeBatch([rows[0]!, rows[2]!])).toThrow(/not consecutive/);
    expect(() => unpackBatch(Buffer.from([0x93, 0x02, 0x01, 0x90]))).toThrow(/version 1/);
    expect(() => unpackBatch(Buffer.from('{}'))).toThrow(/not a batch/);
  });

  it('tells the same batch from another with the same first seq', () => {
    const a = chain(2);
    const b = chain(2).map((r) => ({ ...r, bodyJson: r.bodyJson.replace('}', ',"x":1}') }));
    expect(sameBatch(unpackBatch(encodeBatch(a)), unpackBatch(encodeBatch(chain(2))))).toBe(true);
    expect(sameBatch(unpackBatch(encodeBatch(a)), unpackBatch(encodeBatch(b)))).toBe(false);
    expect(sameBatch(unpackBatch(encodeBatch(a)), unpackBatch(encodeBatch(a.slice(0, 1))))).toBe(false);
  });

  it('splits rows that would pass max_payload into consecutive payloads, each under it', () => {
    const rows = chain(12);
    const whole = encodeBatch(rows).byteLength;
    const parts = encodeBatches(rows, Math.ceil(whole / 3));
    expect(parts.length).toBeGreaterThanOrEqual(3);
    for (const part of parts) expect(part.payload.byteLength).toBeLessThanOrEqual(Math.ceil(whole / 3));
    const back = parts.flatMap((p) => decodeBatch(unpackBatch(p.payload)));
    expect(back.map((r) => r.seq)).toEqual(rows.map((r) => r.seq));
    expect(parts.map((p) => p.first)).toEqual(parts.map((p) => unpackBatch(p.payload).first));
    expect(() => encodeBatches(rows, 40)).toThrow(/over the server's max_payload of 40/);
  });
});
