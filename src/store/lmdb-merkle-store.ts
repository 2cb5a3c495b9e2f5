import type { Database } from 'lmdb';
import type { Stripe } from '../domain/striped-tree.js';
import type { LmdbEnv } from './lmdb-env.js';
import type { MerkleStore } from './merkle-store.js';
import { storeWrite } from './write-failure.js';

type StripeKey = [org: string, level: number, index: number];

/** LMDB adapter of MerkleStore: the `merkle` table, keyed [org, level, index], 8 KB values. */
export class LmdbMerkleStore implements MerkleStore {
  private table!: Database<Buffer, StripeKey>;

  constructor(private readonly env: LmdbEnv) {
    env.attach((root) => (this.table = root.openDB<Buffer, StripeKey>({ name: 'merkle', encoding: 'binary', cache: false })));
  }

  stripe(org: string, level: number, index: number): Buffer | undefined {
    return this.table.get([org, level, index]);
  }

  storedStripes(org: string): number {
    for (const key of this.table.getKeys({ start: [org, 0, Infinity], end: [org, 0, -1], reverse: true, limit: 1 })) return key[2] + 1;
    return 0;
  }

  async put(stripes: readonly { org: string; stripe: Stripe }[]): Promise<void> {
    if (stripes.length === 0) return;
    await storeWrite(
      this.table.transaction(() => {
        for (const { org, stripe } of stripes) void this.table.put([org, stripe.level, stripe.index], stripe.bytes);
      }),
    );
    await this.env.flushed();
  }
}
