import { canonicalEntry, type LedgerRow } from './ledger.js';

/** sha256Many(data, ends, out): message i is data[ends[i-1], ends[i]); digest i goes to out[32 i]. */
export type Sha256Many = (data: Buffer, ends: Uint32Array, out: Buffer) => void;

/**
 * Computes, for a batch of rows, each row's content hash and its chain hash over the row's own
 * prev_hash, with two calls of the injected batch SHA-256 for the whole batch.
 */
export class BatchHasher {
  private data: Buffer = Buffer.alloc(1 << 20);
  private chainInput = Buffer.alloc(0);
  private contents = Buffer.alloc(0);
  private chains = Buffer.alloc(0);

  constructor(private readonly sha256Many: Sha256Many) {}

  hash(rows: readonly LedgerRow[]): { content: Buffer; chain: Buffer }[] {
    const n = rows.length;
    const ends = new Uint32Array(n);
    let at = 0;
    for (let i = 0; i < n; i++) {
      const r = rows[i]!;
      const entry = canonicalEntry(r.seq, r.kind, r.recordedAt, r.agentId, r.bodyJson);
      const need = at + Buffer.byteLength(entry);
      if (need > this.data.length) this.data = grow(this.data, need, at);
      at += this.data.write(entry, at, 'utf8');
      ends[i] = at;
    }
    if (this.contents.length < 32 * n) {
      this.contents = Buffer.alloc(32 * n);
      this.chains = Buffer.alloc(32 * n);
      this.chainInput = Buffer.alloc(64 * n);
    }
    this.sha256Many(this.data, ends, this.contents);
    const chainEnds = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      rows[i]!.prevHash.copy(this.chainInput, 64 * i);
      this.contents.copy(this.chainInput, 64 * i + 32, 32 * i, 32 * i + 32);
      chainEnds[i] = 64 * (i + 1);
    }
    this.sha256Many(this.chainInput, chainEnds, this.chains);
    const out: { content: Buffer; chain: Buffer }[] = new Array(n);
    for (let i = 0; i < n; i++) {
      out[i] = { content: this.contents.subarray(32 * i, 32 * i + 32), chain: this.chains.subarray(32 * i, 32 * i + 32) };
    }
    return out;
  }
}

function grow(buf: Buffer, need: number, used: number): Buffer {
  const next = Buffer.alloc(Math.max(need, buf.length * 2));
  buf.copy(next, 0, 0, used);
  return next;
}
