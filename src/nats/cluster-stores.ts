import type { NatsConnection } from '@nats-io/transport-node';
import { KvCheckpointBoard } from './kv-checkpoint-board.js';
import type { KvBucketOptions } from './kv-mirror.js';
import { KvRegistryStore, type RegistryBuckets } from './kv-registry-store.js';
import { KvPublicRecords } from './kv-public-records.js';
import { KvScoringKeyStore } from './kv-scoring-key-store.js';
import { KvStudioAgentStore } from './kv-studio-agent-store.js';
import { openAll } from './open-all.js';

/** The shared state of cluster mode (DESIGN §8) in KV buckets; webhooks and deliveries are elsewhere. */
export interface ClusterStores {
  registry: KvRegistryStore;
  scoringKeys: KvScoringKeyStore;
  studioAgents: KvStudioAgentStore;
  /** The largest checkpoint of each org any node signed (DESIGN §10 in cluster mode). */
  checkpoints: KvCheckpointBoard;
  /** The public records the orgs' owners publish: what public reads answer from. */
  publicRecords: KvPublicRecords;
  /** Stops the watches; the connection stays open (it is the caller's). */
  close(): Promise<void>;
}

export interface ClusterBuckets extends RegistryBuckets {
  /** Default `vigil_scoring_keys`. */
  scoringKeys: string;
  /** Default `vigil_scoring_uses`. */
  scoringUses: string;
  /** Default `vigil_studio_agents`. */
  studioAgents: string;
  /** Default `vigil_checkpoints`. */
  checkpoints: string;
  /** Default `vigil_public`. */
  publicRecords: string;
}

export interface ClusterStoreOptions extends KvBucketOptions {
  /** Other bucket names (tests, so that cases do not meet). */
  buckets?: Partial<ClusterBuckets>;
}

/**
 * Opens every KV store of cluster mode over a connection the caller keeps, creating the buckets
 * that are absent with `replicas`. Resolves once each store holds its bucket's current values;
 * if one cannot open, those opened are closed and its error is thrown.
 */
export async function openClusterStores(nc: NatsConnection, options: ClusterStoreOptions): Promise<ClusterStores> {
  const { buckets = {}, ...bucketOptions } = options;
  const [registry, scoringKeys, studioAgents, checkpoints, publicRecords] = await openAll([
    KvRegistryStore.open(nc, { ...bucketOptions, buckets: { orgs: buckets.orgs, keys: buckets.keys, keyUses: buckets.keyUses } }),
    KvScoringKeyStore.open(nc, { ...bucketOptions, buckets: { keys: buckets.scoringKeys, uses: buckets.scoringUses } }),
    KvStudioAgentStore.open(nc, { ...bucketOptions, bucket: buckets.studioAgents }),
    KvCheckpointBoard.open(nc, { ...bucketOptions, bucket: buckets.checkpoints }),
    KvPublicRecords.open(nc, { ...bucketOptions, bucket: buckets.publicRecords }),
  ]);
  return {
    registry,
    scoringKeys,
    studioAgents,
    checkpoints,
    publicRecords,
    close: async () => {
      await Promise.all([registry.close(), scoringKeys.close(), studioAgents.close(), checkpoints.close(), publicRecords.close()]);
    },
  };
}
