import { LmdbEnv, type Durability } from './lmdb-env.js';
import { LmdbLedger } from './lmdb-ledger.js';
import { LmdbRegistryStore } from './lmdb-registry.js';
import { LmdbSnapshotStore } from './lmdb-snapshots.js';
import { LmdbWebhookStore } from './lmdb-webhook-store.js';

export type { Durability };

/** The LMDB adapters of one data dir: one object per port, all in one environment. */
export interface LmdbStores {
  env: LmdbEnv;
  /** LedgerReader, and the table under the ledger log. */
  ledger: LmdbLedger;
  registry: LmdbRegistryStore;
  snapshots: LmdbSnapshotStore;
  webhooks: LmdbWebhookStore;
  close(): Promise<void>;
}

/** Opens (creating if need be) the LMDB environment of `dir` and its adapters. */
export function openLmdb(dir: string, durability: Durability = 'sync', options: { readOnly?: boolean; minFreeBytes?: number } = {}): LmdbStores {
  const env = new LmdbEnv(dir, durability, options);
  return {
    env,
    ledger: new LmdbLedger(env),
    registry: new LmdbRegistryStore(env),
    snapshots: new LmdbSnapshotStore(env),
    webhooks: new LmdbWebhookStore(env),
    close: () => env.close(),
  };
}
