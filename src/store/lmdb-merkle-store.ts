import type { Database, Transaction } from 'lmdb';
import type { Stripe } from '../domain/striped-tree.js';
import type { LmdbEnv } from './lmdb-env.js';
import type { MerkleStore } from './merkle-store.js';
import { storeWrite } from './write-failure.js';

type StripeKey = [org: string, level: number, index: number];
/** How long proofs may read in one read transaction. */
const READ_TXN_MS = 1000;

/** LMDB adapter of MerkleStore: the `merkle` table, keyed [org, level, index], 8 KB values. */
export class LmdbMerkleStore implements MerkleStore {
  private table!: Database<Buffer, StripeKey>;
  /**
   * The read transaction proofs read hashes in, kept across requests: lmdb-js otherwise renews its
   * read transaction on every event-loop turn, which cost a proof more than its reads. Stored
   * stripes never change, so it only has to be new enough: it is dropped when a write of stripes
   * ends (they are read from memory until then) and after a second at most, so it never pins old
   * pages for long.
   */
  private reading: { txn: Transaction; timer: NodeJS.Timeout } | null = null;
  /** The two hashes (slots `pair`, `pair` + 1) of the stored stripe read last: stored stripes never change. */
  private lastPair: { org: string; level: number; index: number; pair: number; bytes: Buffer } | null = null;

  constructor(private readonly env: LmdbEnv) {
    env.attach((root) => (this.table = root.openDB<Buffer, StripeKey>({ name: 'merkle', encoding: 'binary', cache: false })));
  }

  stripe(org: string, level: number, index: number): Buffer | undefined {
    return this.table.get([org, level, index]);
  }

  hash(org: string, level: number, index: number, slot: number): Buffer | undefined {
    // A proof asks for its leaf and the leaf's sibling, one pair of one stripe: the pair read last is kept.
    const pair = slot - (slot % 2);
    const last = this.lastPair;
    if (last !== null && last.index === index && last.pair === pair && last.level === level && last.org === org) return last.bytes.subarray((slot - pair) * 32, (slot - pair) * 32 + 32);
    // Read in place (lmdb-js's shared buffer, valid until the next read) and copy the pair out:
    // a copy of each 8 KB stripe was most of a proof's cost.
    this.reading ??= { txn: this.table.useReadTransaction(), timer: setTimeout(() => this.release(), READ_TXN_MS).unref() };
    const bytes = readFast(this.table, [org, level, index], this.reading.txn);
    if (bytes === undefined || bytes.length !== 256 * 32) return undefined; // missing, or short: damaged
    this.lastPair = { org, level, index, pair, bytes: Buffer.from(bytes.subarray(pair * 32, pair * 32 + 64)) };
    return this.lastPair.bytes.subarray((slot - pair) * 32, (slot - pair) * 32 + 32);
  }

  storedStripes(org: string): number {
    for (const key of this.table.getKeys({ start: [org, 0, Infinity], end: [org, 0, -1], reverse: true, limit: 1 })) return key[2] + 1;
    return 0;
  }

  async put(stripes: readonly { org: string; stripe: Stripe }[], drop: readonly string[] = []): Promise<void> {
    if (stripes.length === 0 && drop.length === 0) return;
    await storeWrite(
      this.table.transaction(() => {
        for (const org of drop) for (const key of this.table.getKeys({ start: [org, -1, -1], end: [org, Infinity, Infinity] })) void this.table.remove(key);
        for (const { org, stripe } of stripes) void this.table.put([org, stripe.level, stripe.index], stripe.bytes);
      }),
    );
    await this.env.flushed();
    this.release();
  }

  /** Ends the proofs' read transaction; before the environment closes. */
  close(): void {
    this.release();
  }

  private release(): void {
    this.lastPair = null;
    if (this.reading === null) return;
    clearTimeout(this.reading.timer);
    this.reading.txn.done();
    this.reading = null;
  }
}

/** lmdb-js's getBinaryFast in a given transaction (it takes one; its types do not say so). */
function readFast(table: Database<Buffer, StripeKey>, key: StripeKey, transaction: Transaction): Buffer | undefined {
  return (table.getBinaryFast as (this: Database<Buffer, StripeKey>, id: StripeKey, options: { transaction: Transaction }) => Buffer | undefined).call(table, key, { transaction });
}
