import { ownerHandler } from '../actors/owner-handler.js';
import type { KeyObject } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNode } from './node-connection.js';
import type { AppendOutcome, BatchHandler, CommittedBatch, Fence, LedgerCapability, LedgerLog, Position, Subscription } from '../bus/ledger-log.js';
import type { NotOwner } from '../bus/messages.js';
import type { LedgerRow } from '../domain/ledger.js';
import type { AgentDirectory } from '../actors/agent-directory.js';
import type { DeliveryActor } from '../actors/delivery-actor.js';
import type { DeliveryScope } from '../actors/delivery-scope.js';
import type { OrgActors } from '../actors/org-actors.js';
import type { ClusterConfig } from '../config.js';
import { ensureError, StartError } from '../errors.js';
import type { Logger } from '../log.js';
import type { LmdbStores } from '../store/lmdb.js';
import type { LmdbLedgerLog } from '../store/lmdb-ledger-log.js';
import { ensureClusterLogKey, ensureClusterLogOrigin, LogKeyDiffersError } from './cluster-log-key.js';
import { ensureClusterSettings, defaultReplicas } from './cluster-settings.js';
import { openClusterStores, type ClusterStores } from './cluster-stores.js';
import { openClusterWebhooks, type ClusterWebhooks } from './cluster-webhooks.js';
import { JetStreamLedgerLog } from './jetstream-ledger-log.js';
import { EarlierLayoutError } from './ledger-migration.js';
import { LedgerReplica } from './ledger-replica.js';
import { NatsCommandRouter } from './nats-command-router.js';
import { PartitionLeases } from './partition-leases.js';
import { partitionOf } from './partition.js';
import { PublicPublisher } from './public-publisher.js';

/**
 * How long a writer's answers wait for a batch's deliveries to be stored in the webhook stream:
 * a stream that does not answer must not hold the org's writes (see OrgActorOptions.afterAppendMs).
 */
export const AFTER_APPEND_MS = 2000;

/** How long an append waits for the ledger stream's ack. */
const APPEND_TIMEOUT_MS = 5000;

/** What a writer answers when the fence refused its batch: the router routes it to the owner. */
export const NOT_OWNER: NotOwner = { ok: false, code: 'not_owner', message: 'another node wrote this org\'s ledger first' };

/**
 * The writers' log in cluster mode: appends go to the stream (fenced there), and once acknowledged
 * to this node's replica, which no consumer feeds them back to; a writer starting or healing
 * recovers from the local replica once it holds the org's last batch (from the stream itself, one
 * get per batch, if the replica's copy of the org has diverged from it).
 */
class WriterLog implements LedgerLog {
  readonly capabilities: readonly LedgerCapability[] = [];

  constructor(
    private readonly stream: JetStreamLedgerLog,
    private readonly replica: LedgerReplica,
  ) {}

  async append(org: string, rows: readonly LedgerRow[], expected: Fence): Promise<AppendOutcome> {
    const outcome = await this.stream.append(org, rows, expected);
    if (outcome.ok) this.replica.applyOwn(org, rows, outcome.fence);
    return outcome;
  }

  read(org: string, fromSeq: number): AsyncIterable<CommittedBatch> {
    // A replica whose copy of the org is not the stream's must not be what a writer builds on.
    return this.replica.hasDiverged(org) ? this.stream.readWhole(org, fromSeq) : this.replica.readCaughtUp(org, fromSeq);
  }

  positionAfter(held: ReadonlyMap<string, number>): Position {
    return this.stream.positionAfter(held);
  }

  subscribe(_handler: BatchHandler, _from: Position): Promise<Subscription> {
    // No node follows the whole stream (a migrated stream would also hand an earlier version's batches twice).
    return Promise.reject(new Error('cluster mode has no whole-stream feed: a node reads the partitions it owns'));
  }

  async close(): Promise<void> {
    // The stream and the replica are closed by the node.
  }
}

/**
 * This node's membership of a cluster (DESIGN §8): one NATS connection shared by the ledger
 * stream, this node's copy of its partitions, the command router, the partition leases and the KV
 * stores. Opened before the actors; `serve` then hands the writers the partitions this node wins,
 * and the copy reads each from the stream as it is gained.
 */
export class ClusterNode {
  /** The log the org writers append to. */
  readonly writerLog: LedgerLog;
  private publisher: PublicPublisher | null = null;

  private constructor(
    readonly config: ClusterConfig,
    readonly nc: NatsConnection,
    readonly replicas: number,
    readonly ledger: JetStreamLedgerLog,
    readonly replica: LedgerReplica,
    readonly commands: NatsCommandRouter,
    readonly leases: PartitionLeases,
    /** Orgs, keys, plans, sandbox keys and studio agents, shared by every node. */
    readonly stores: ClusterStores,
    /** Webhooks and deliveries, shared through the VIGIL_WEBHOOKS stream. */
    readonly webhooks: ClusterWebhooks,
    private readonly ledgerReader: LmdbStores['ledger'],
    private readonly log: Logger,
  ) {
    this.writerLog = new WriterLog(ledger, replica);
    // This node's copy holds the partitions it owns: a gained one is read from the stream. First
    // of the leases' listeners, so the others find the read under way.
    replica.ownedBy((partition) => leases.owns(partition));
    leases.onChange(({ gained, lost }) => {
      replica.partitions.unfollow(lost);
      replica.partitions.follow(gained);
    });
  }

  /**
   * Connects, checks the cluster's settings (VIGIL_PARTITIONS must match the first node's), opens
   * the ledger stream and catches the local replica up with it. A failure closes what was opened.
   */
  static async join(config: ClusterConfig, store: LmdbStores, local: LmdbLedgerLog, log: Logger): Promise<ClusterNode> {
    let nc: NatsConnection;
    try {
      nc = await connectNode({ servers: config.servers, name: `vigil ${config.node}`, maxReconnectAttempts: -1 });
    } catch (error) {
      throw new StartError('cluster_unavailable', `cannot reach NATS at ${config.servers.join(',')} (VIGIL_NATS_URL): ${ensureError(error).message}`, { cause: error });
    }
    const closing: (() => Promise<unknown>)[] = [() => nc.close()];
    try {
      const replicas = config.replicas ?? defaultReplicas(nc);
      try {
        await ensureClusterSettings(nc, { partitions: config.partitions, replicas });
      } catch (error) {
        throw new StartError('cluster_mismatch', ensureError(error).message, { cause: error });
      }
      const stores = await openClusterStores(nc, { replicas, log });
      closing.unshift(() => stores.close());
      const ledger = await JetStreamLedgerLog.open(nc, { replicas, partitions: config.partitions, timeoutMs: APPEND_TIMEOUT_MS, log }).catch((error: unknown) => {
        throw error instanceof EarlierLayoutError ? new StartError('cluster_mismatch', error.message, { cause: error }) : error;
      });
      closing.unshift(() => ledger.close());
      // A gained partition's second read: after the previous owner's last append can have been stored.
      const secondReadMs = config.leaseSeconds * 1000 + APPEND_TIMEOUT_MS + 1000;
      const replica = await LedgerReplica.start(nc, ledger, local, store.ledger, { meta: store.env.table<string, number>('replica'), secondReadMs, log });
      closing.unshift(() => replica.close());
      const commands = NatsCommandRouter.open(nc, { partitions: config.partitions, log });
      closing.unshift(() => commands.close());
      const webhooks = await openClusterWebhooks(nc, store, { node: config.node, replicas, log });
      closing.unshift(() => webhooks.replica.close());
      const leases = await PartitionLeases.open(nc, { node: config.node, partitions: config.partitions, leaseSeconds: config.leaseSeconds, replicas, log });
      log.info({ node: config.node, holder: leases.holder, replicas, partitions: config.partitions }, 'joined the cluster');
      return new ClusterNode(config, nc, replicas, ledger, replica, commands, leases, stores, webhooks, store.ledger, log);
    } catch (error) {
      for (const close of closing) await close().catch(() => undefined);
      throw error;
    }
  }

  /**
   * The key this node signs checkpoints and receipts with: the cluster's one log key, `own`
   * (VIGIL_LOG_KEY) if given and agreed, else the key the cluster keeps (see ensureClusterLogKey).
   */
  async logKey(own: KeyObject | null): Promise<KeyObject> {
    try {
      return await ensureClusterLogKey(this.nc, own, { replicas: this.replicas });
    } catch (error) {
      throw new StartError(error instanceof LogKeyDiffersError ? 'cluster_mismatch' : 'cluster_unavailable', ensureError(error).message, { cause: error });
    }
  }

  /** The host every node names the log by: the first node's base URL host (see ensureClusterLogOrigin). */
  async logOrigin(host: string): Promise<string> {
    try {
      return await ensureClusterLogOrigin(this.nc, host, { replicas: this.replicas });
    } catch (error) {
      throw new StartError('cluster_unavailable', ensureError(error).message, { cause: error });
    }
  }

  /**
   * Read-your-writes of keyed reads: resolves once this node's copies of the ledger and of the
   * webhook store hold the org's writes acknowledged so far (bounded, else 503).
   */
  async caughtUp(org: string): Promise<void> {
    await Promise.all([this.replica.caughtUp(org), this.webhooks.replica.caughtUp(org)]);
  }

  /** What the delivery actor needs to make, store and send the deliveries of the orgs this node owns only. */
  deliveryScope(): DeliveryScope {
    const partitions = this.config.partitions;
    return {
      owns: (org) => this.leases.owns(partitionOf(org, partitions)),
      caughtUp: (org) => this.caughtUp(org),
      ledger: this.ledgerReader,
      ids: this.webhooks.ids,
    };
  }

  /**
   * Serves the commands of the orgs in the partitions this node holds. A partition gained or lost
   * drops its orgs' writers, so the next command starts its writer from the org's last batch; the
   * delivery actor stops sending a lost partition's deliveries and takes a gained one's over.
   */
  serve(actors: OrgActors, deliveries?: DeliveryActor, reads?: Parameters<typeof ownerHandler>[2]): void {
    const partitions = this.config.partitions;
    this.leases.onChange(({ gained, lost }) => {
      const moved = new Set([...gained, ...lost]);
      actors.forget((org) => moved.has(partitionOf(org, partitions)));
      if (lost.length > 0) deliveries?.release((org) => lost.includes(partitionOf(org, partitions)));
      if (gained.length > 0) deliveries?.take((org) => gained.includes(partitionOf(org, partitions)));
      if (gained.length + lost.length > 0) this.log.info({ gained: gained.length, lost: lost.length, owned: this.leases.owned().length }, 'partitions changed hands');
    });
    this.commands.serve(ownerHandler(actors, deliveries, reads), { owns: (org) => this.owns(org) });
    this.leases.start();
  }

  /**
   * Publishes the public records of the orgs this node owns from `directory` (see
   * PublicPublisher): each org whose rows it applies, and every org of a partition gained. Called
   * before `serve`, so the partitions first won are published too.
   */
  publishPublicRecords(directory: AgentDirectory): void {
    const partitions = this.config.partitions;
    const publicRecords = this.stores.publicRecords;
    // Only what this node read since gaining the org: a copy still being read would put back older records.
    const readHere = (org: string): boolean => this.replica.partitions.hasRead(partitionOf(org, partitions));
    const publisher = new PublicPublisher(publicRecords, (org) => directory.org(org), { owns: (org) => this.owns(org) && readHere(org), log: this.log });
    directory.onChange((org) => publisher.changed(org));
    this.leases.onChange(({ gained }) => {
      for (const partition of gained) {
        void this.replica.partitions
          .firstRead(partition)
          .then(() => {
            const orgs = new Set([...directory.orgNames(), ...publicRecords.orgNames()]);
            publisher.markAll([...orgs].filter((org) => partitionOf(org, partitions) === partition));
          })
          .catch((error: unknown) => this.log.error({ partition, err: ensureError(error) }, 'public records: a gained partition was not marked for publishing'));
      }
    });
    publisher.start();
    this.publisher = publisher;
  }

  /** Whether this node owns `org` now (holds its partition's lease). */
  owns(org: string): boolean {
    return this.leases.owns(partitionOf(org, this.config.partitions));
  }

  partitionsOwned(): number[] {
    return this.leases.owned();
  }

  /** Publishes the public records left, releases the leases (another node takes the partitions at once), then the rest. */
  async close(): Promise<void> {
    // The public records first: the last flush needs the leases it publishes under.
    const steps: (() => Promise<unknown>)[] = [async () => this.publisher?.close(), () => this.leases.close(), () => this.commands.close(), () => this.webhooks.replica.close(), () => this.replica.close(), () => this.ledger.close(), () => this.stores.close(), () => this.nc.drain()];
    for (const step of steps) {
      try {
        await step();
      } catch (error) {
        this.log.error({ err: ensureError(error) }, 'leaving the cluster: a step failed');
      }
    }
  }
}
