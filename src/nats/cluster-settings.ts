import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';

export interface ClusterSettingsOptions {
  /** VIGIL_PARTITIONS of this node. */
  partitions: number;
  /** Replicas of the settings bucket when this node creates it. */
  replicas: number;
  /** Default `vigil_cluster`; tests pass their own. */
  bucket?: string;
}

export const CLUSTER_BUCKET = 'vigil_cluster';

/** This node's VIGIL_PARTITIONS is not the cluster's: orgs would hash to other partitions here. */
export class PartitionsDifferError extends Error {
  override readonly name = 'PartitionsDifferError';
  readonly code = 'partitions_differ';
  constructor(
    readonly configured: number,
    readonly cluster: number,
  ) {
    super(`VIGIL_PARTITIONS (${configured}) differs from the cluster's value ${cluster}, fixed for the cluster's life: set VIGIL_PARTITIONS=${cluster}`);
  }
}

/**
 * Settings fixed for the cluster's life (DESIGN §8), in a replicated KV bucket without ttl. The
 * first node stores its partition count (`create` of key `partitions`: of nodes starting together
 * exactly one succeeds); every later node must have the same, else PartitionsDifferError.
 */
export async function ensureClusterSettings(nc: NatsConnection, options: ClusterSettingsOptions): Promise<void> {
  const bucket = options.bucket ?? CLUSTER_BUCKET;
  const kv = await new Kvm(nc).create(bucket, { history: 1, replicas: options.replicas });
  try {
    await kv.create('partitions', String(options.partitions));
    return;
  } catch (error) {
    const stored = await kv.get('partitions');
    if (stored === null || stored.operation !== 'PUT') throw error; // not refused for being there: the create failed
    const cluster = Number(stored.string());
    if (!Number.isInteger(cluster) || cluster < 1) throw new Error(`KV bucket ${bucket} holds partitions ${JSON.stringify(stored.string())}, not a partition count`, { cause: error });
    if (cluster !== options.partitions) throw new PartitionsDifferError(options.partitions, cluster);
  }
}

/** Replicas for Vigil's streams and buckets: 3 when the server is part of a cluster, else 1. */
export function defaultReplicas(nc: NatsConnection): number {
  return nc.info?.cluster !== undefined && nc.info.cluster !== '' ? 3 : 1;
}
