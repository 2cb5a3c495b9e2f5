import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import type { LmdbStores } from '../store/lmdb.js';
import { DeliveryIdBlocks } from './delivery-id-blocks.js';
import { ReplicatedWebhookStore } from './replicated-webhook-store.js';
import { WebhookReplica } from './webhook-replica.js';
import { ensureWebhookStream, WEBHOOK_STREAM, type WebhookStreamNames } from './webhook-stream.js';

export interface ClusterWebhooksOptions {
  /** This node's name (shown in the delivery id reservations). */
  node: string;
  replicas: number;
  names?: WebhookStreamNames;
  log: Logger;
}

/** The node's webhooks and deliveries in cluster mode: the shared store, this node's copy of it, and delivery ids. */
export interface ClusterWebhooks {
  store: ReplicatedWebhookStore;
  replica: WebhookReplica;
  ids: DeliveryIdBlocks;
}

/** The server's default max_payload, if it does not say. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/**
 * Opens the `VIGIL_WEBHOOKS` stream (creating it if absent, with the ledger's rules) and catches
 * this node's LmdbWebhookStore up with it, so the webhook registry and the delivery actor start
 * from every webhook and delivery the cluster holds. The connection is borrowed.
 */
export async function openClusterWebhooks(nc: NatsConnection, stores: LmdbStores, options: ClusterWebhooksOptions): Promise<ClusterWebhooks> {
  const names = options.names ?? WEBHOOK_STREAM;
  const timeout = 5000;
  const jsm = await jetstreamManager(nc, { timeout });
  const js = jetstream(nc, { timeout });
  await ensureWebhookStream(jsm, names, options.replicas, options.log);
  const replica = await WebhookReplica.start(js, jsm, stores.webhooks, { meta: stores.env.table<string, number>('replica'), names, log: options.log });
  const store = new ReplicatedWebhookStore(js, replica, stores.webhooks, { names, maxPayload: nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD });
  const ids = new DeliveryIdBlocks(js, { names, holder: options.node, lastIdOf: (org) => replica.lastDeliveryIdOf(org) });
  return { store, replica, ids };
}
