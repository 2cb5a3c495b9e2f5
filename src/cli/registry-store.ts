import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import type { Config } from '../config.js';
import { VigilError } from '../errors.js';
import type { Logger } from '../log.js';
import { defaultReplicas } from '../nats/cluster-settings.js';
import { KvRegistryStore } from '../nats/kv-registry-store.js';
import type { RegistryStore } from '../store/registry-store.js';
import { openLmdb } from '../store/lmdb.js';

export interface CliRegistry {
  store: RegistryStore;
  close(): Promise<void>;
}

/**
 * The registry the CLI's `keys create` and `orgs set-plan` write to, as the server they serve
 * beside reads it. Embedded: the data dir's LMDB, every table opened as the server opens them
 * (README "Guarantees", a full disk), no serving lock. Cluster (VIGIL_NATS_URL): the KV buckets,
 * over a connection of its own, created if absent with the replicas DESIGN §8 names; no data dir
 * is touched, and every node sees the write through its watch.
 */
export async function openCliRegistry(config: Config, log: Logger, options: { existing?: boolean } = {}): Promise<CliRegistry> {
  if (config.cluster === undefined) {
    // A command that only reads or changes what is there (keys list, keys revoke) must not leave
    // an empty data dir behind a mistyped VIGIL_DATA_DIR.
    if (options.existing === true && !existsSync(join(config.dataDir, 'data.mdb'))) {
      throw new VigilError('not_found', `no Vigil data in ${config.dataDir} (set VIGIL_DATA_DIR to the server's data dir)`);
    }
    const stores = openLmdb(config.dataDir, config.durability, { minFreeBytes: config.minFreeBytes });
    return { store: stores.registry, close: () => stores.close() };
  }
  const servers = config.cluster.servers;
  const nc = await connect({ servers }).catch((error: unknown) => {
    throw new VigilError('unavailable', `cannot reach NATS at ${servers.join(',')}: ${error instanceof Error ? error.message : String(error)}`, undefined, { cause: error });
  });
  try {
    const store = await KvRegistryStore.open(nc, { replicas: config.cluster.replicas ?? defaultReplicas(nc), log });
    return {
      store,
      close: async () => {
        await store.close();
        await nc.close();
      },
    };
  } catch (error) {
    await nc.close();
    throw error;
  }
}
