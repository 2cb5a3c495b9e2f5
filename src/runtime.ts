import { ownerHandler } from './actors/owner-handler.js';
import { randomUUID } from 'node:crypto';
import { AgentDirectory } from './actors/agent-directory.js';
import { saveCheckpoints } from './actors/checkpoints.js';
import { DeliveryActor } from './actors/delivery-actor.js';
import { ExportLog } from './actors/export-log.js';
import { WriterShare } from './actors/writer-share.js';
import { KeyedReads } from './http/keyed-reads.js';
import { projectionsSettled } from './actors/projections-settled.js';
import { IntakePacer } from './http/intake-pacer.js';
import { OrgActors } from './actors/org-actors.js';
import { directorySources, PublicRecords } from './actors/public-records.js';
import { startConsumers } from './actors/start-up.js';
import { ReviewQueue } from './actors/review-queue.js';
import { UsageMeter } from './actors/usage-meter.js';
import { LogCheckpoints } from './actors/log-checkpoints.js';
import { MerkleTrees } from './actors/merkle-trees.js';
import { loadLogKey, loadLogOrigin } from './services/log-key.js';
import { dropLedgerEnvStripes, openMerkleStore } from './store/lmdb-merkle-store.js';
import { WebhookRegistry } from './services/webhook-registry.js';
import { blockingLimit, writerLimits } from './domain/billing.js';
import { LocalCommandRouter } from './bus/local-router.js';
import type { CommandRouter } from './bus/command-router.js';
import type { LedgerLog } from './bus/ledger-log.js';
import { ClusterNode, NOT_OWNER, AFTER_APPEND_MS } from './nats/cluster-node.js';
import { partitionMap } from './nats/partition-map.js';
import { withBoundPort, type Config } from './config.js';
import { ensureError, StartError } from './errors.js';
import { OpenAiCompatibleModel } from './demo/openai-model.js';
import { Studio } from './services/studio.js';
import { LmdbStudioAgentStore } from './demo/studio-store.js';
import { TemplateModel } from './demo/template-model.js';
import { POLICY_V1, policyDigest } from './domain/policy.js';
import { Scope } from './domain/schemas.js';
import type { Route } from './http/router.js';
import { startHttpServer } from './http/server.js';
import { checkReceiverUrl, type Lookup } from './net/receiver-address.js';
import { createLogger, type Logger } from './log.js';
import { Metrics } from './metrics.js';
import { Registry, USE_FLUSH_MS } from './services/registry.js';
import { nativeSha256Nodes, nativeSha256Rows } from './store/batch-hash.js';
import { openLmdb } from './store/lmdb.js';
import type { RegistryStore } from './store/registry-store.js';
import { LmdbLedgerLog } from './store/lmdb-ledger-log.js';
import { PartitionedReplay, type ReplayOptions } from './store/partitioned-replay.js';
import { LmdbScoringKeyStore } from './record-scoring/lmdb-key-store.js';
import { lockDataDir, type DataDirLock } from './store/data-dir-lock.js';
import type { WebhookStore } from './store/webhook-store.js';
import { closeVerifyWorkers, verifyChain } from './store/verify-chain.js';

export interface Runtime {
  port: number;
  mode: 'embedded' | 'cluster';
  /** The admin key created on a first start with an empty data dir, printed once. */
  firstKey: string | null;
  /** The HTTP routes mounted. */
  routes: readonly Route[];
  close(): Promise<void>;
}

/** The composition root: picks the adapters for the mode and starts actors and the front end. */
/** Seams for tests (production passes none of them but showFirstKey). */
export interface RuntimeOptions {
  /**
   * Shows the admin key created on a first start to the operator (the CLI's terminal banner), before
   * the front end listens. The key never enters a log line.
   */
  showFirstKey?: (key: string) => void;
  /** Resolves receiver host names (DNS by default). */
  lookup?: Lookup;
  /** Bound on one webhook attempt (10 s by default). */
  webhookTimeoutMs?: number;
  /** Start-up: orgs replayed from their first row with at least this many rows are cut by agent across threads. */
  partitionedReplayFrom?: number;
  /** Start-up: how a partitioned replay runs (threads, how long workers may take). */
  replay?: ReplayOptions;
  /**
   * False: the Merkle trees are not fed (the bench's A/B of the write path without them); the log's
   * routes answer 503 as while a tree catches up, and no checkpoint is signed. Default true.
   */
  transparencyLog?: boolean;
}

/**
 * Starts the service on `config.dataDir`, which it locks for its life (a second runtime on the same
 * dir, in this process or another, is refused with StartError `data_dir_locked`). A start that fails
 * half-way closes what it opened and releases the lock before rejecting.
 */
export async function startRuntime(config: Config, log: Logger = createLogger(config.logLevel), options: RuntimeOptions = {}): Promise<Runtime> {
  const lock = lockDataDir(config.dataDir);
  const opened: (() => unknown)[] = [() => lock.release()];
  try {
    return await start(config, log, options, lock, opened);
  } catch (error) {
    for (const close of opened.reverse()) {
      try {
        await close();
      } catch (closing) {
        log.error({ err: ensureError(closing) }, 'closing after a failed start failed');
      }
    }
    throw error;
  }
}

/** `opened` collects what a failed start must close, in the order opened. */
async function start(config: Config, log: Logger, options: RuntimeOptions, lock: DataDirLock, opened: (() => unknown)[]): Promise<Runtime> {
  const now = (): number => Date.now();
  // In cluster mode the data dir is a replica of the stream, rebuilt from it if lost: its commits
  // need not wait for fsync (a 200 rests on the stream's quorum, not on this disk).
  const store = openLmdb(config.dataDir, config.cluster === undefined ? config.durability : 'process', { minFreeBytes: config.minFreeBytes });
  opened.push(() => store.close());

  // This node's ledger: in embedded mode the system of record, in cluster mode a replica of the
  // stream; the projections follow it in both.
  const local = new LmdbLedgerLog(store.ledger, log);
  opened.push(() => local.close());
  const cluster = config.cluster === undefined ? null : await ClusterNode.join(config.cluster, store, local, log);
  if (cluster !== null) opened.push(() => cluster.close());
  // Orgs, keys and plans: this node's in embedded mode, the cluster's KV buckets in cluster mode.
  const registryStore: RegistryStore = cluster?.stores.registry ?? store.registry;
  const registry = new Registry(registryStore);
  // Key uses (GET /admin/keys' last_used_at), written a minute at a time off the request path.
  const flushUses = (): Promise<void> => registry.flushUses().catch((error: unknown) => log.warn({ err: ensureError(error) }, 'recording key uses failed; tried again with the next'));
  const usesTimer = setInterval(() => void flushUses(), USE_FLUSH_MS);
  usesTimer.unref();
  opened.push(() => clearInterval(usesTimer));
  const firstKey = await bootstrap(config, registryStore, registry);
  if (firstKey !== null) options.showFirstKey?.(firstKey);
  const ledger: LedgerLog = cluster?.writerLog ?? local;
  const commands: CommandRouter = cluster?.commands ?? new LocalCommandRouter();
  const mode = cluster === null ? 'embedded' : 'cluster';
  const digest = policyDigest(POLICY_V1);
  // GET /metrics (VIGIL_METRICS_TOKEN): read from the actors when scraped; nothing is made without the token.
  const metrics: Metrics | null =
    config.metrics === null
      ? null
      : new Metrics(
          {
            writerDepths: () => actors.depths(),
            deliveriesQueued: () => deliveries.waiting,
            replicationLag: cluster === null ? undefined : () => cluster.replica.lag(),
            forwardedCommands: cluster === null ? undefined : () => cluster.commands.forwarded,
          },
          { orgLabels: config.metrics.orgLabels },
        );
  const actors = new OrgActors(ledger, {
    // Embedded, the writers share LMDB's one write thread (WriterShare); cluster writers append to the stream.
    ...(cluster === null ? { share: new WriterShare((run) => local.together(run)), recentKeysKept: 0 } : { fromReplay: false, onConflict: NOT_OWNER, afterAppendMs: AFTER_APPEND_MS }),
    log,
    policy: POLICY_V1,
    policyDigest: digest,
    now,
    maxPending: config.maxPendingPerOrg,
    maxBatch: config.writerMaxBatch,
    sha256Rows: nativeSha256Rows,
    limits: (org, nowMs) => writerLimits(registry.planOf(org), nowMs),
    // Deliveries are stored before the command that caused them is answered.
    afterAppend: (org, rows) => deliveries.onCommitted(org, rows),
    // Idempotency keys: the index this node's ledger writes with the rows (cluster: the replica's).
    findKey: (org, key) => store.ledger.findKey(org, key),
    committed: metrics === null ? undefined : (records, seconds) => metrics.committed(records, seconds),
  });
  if (cluster === null) opened.push(() => commands.close());
  const directory = new AgentDirectory();
  const reviews = new ReviewQueue();
  const meter = new UsageMeter();
  const exportLog = new ExportLog();
  const projections = { directory, reviews, meter, exports: exportLog };
  const lookup = options.lookup;
  // Cluster mode: shared through the VIGIL_WEBHOOKS stream, read from this node's copy.
  const webhookStore: WebhookStore = cluster?.webhooks.store ?? store.webhooks;
  const webhooks = new WebhookRegistry(webhookStore, {
    checkUrl: (url) => checkReceiverUrl(url, { allowPrivate: config.webhookAllowPrivate, ...(lookup === undefined ? {} : { lookup }) }),
    // The committed tail, not a projection's length (which may trail rows still being delivered).
    ledgerLength: (org) => store.ledger.last(org)?.seq ?? 0,
    maxActive: (org) => {
      const plan = registry.planOf(org);
      return { plan: plan.name, limit: blockingLimit(plan, 'webhooks') };
    },
    now,
  });
  const deliveries: DeliveryActor = new DeliveryActor(webhookStore, webhooks, {
    schedule: config.webhookRetrySchedule,
    disableDays: config.webhookDisableDays,
    allowPrivate: config.webhookAllowPrivate,
    timeoutMs: options.webhookTimeoutMs ?? 10_000,
    bounds: { total: 16, perOrg: 8, perWebhook: 2, slow: 4, slowPerOrg: 4 },
    policyDigest: digest,
    now,
    newId: randomUUID,
    ...(lookup === undefined ? {} : { lookup }),
    ...(cluster === null ? {} : { scope: cluster.deliveryScope() }),
    attempted: metrics === null ? undefined : (outcome) => metrics.delivery(outcome),
    log,
  });
  opened.push(() => deliveries.close());
  await dropLedgerEnvStripes(store.env).then(
    (dropped) => dropped && log.info({}, 'the Merkle trees\' stripes moved to an environment of their own: the old table is dropped, and the trees rebuilt from the ledger'),
    (error: unknown) => log.warn({ err: ensureError(error) }, 'the Merkle trees\' old table in the ledger\'s environment could not be dropped (a full disk?); dropped on a later start'),
  );
  const merkleStore = openMerkleStore(config.dataDir, log, { minFreeBytes: config.minFreeBytes });
  opened.push(() => merkleStore.close());
  const trees = new MerkleTrees(merkleStore, store.ledger, log, { cacheBytes: config.treeCacheBytes, sha256Nodes: nativeSha256Nodes });
  opened.push(() => trees.close());
  const feedTrees = options.transparencyLog !== false;
  if (!feedTrees) trees.switchOff();
  // Cluster mode: the one key the nodes share (VIGIL_LOG_KEY if set, else the one the cluster keeps).
  const logKey =
    cluster === null ? loadLogKey(config.dataDir, config.logKeyPath) : await cluster.logKey(config.logKeyPath === undefined ? null : loadLogKey(config.dataDir, config.logKeyPath));
  const rebuilt = await startConsumers({
    reader: store.ledger,
    ledger: local,
    replayDeliveries: cluster === null,
    snapshots: store.snapshots,
    actors,
    projections,
    deliveries,
    trees: feedTrees ? trees : undefined,
    policy: POLICY_V1,
    policyDigest: digest,
    log,
    bulkReplay: new PartitionedReplay(store.env, store.ledger, { ...options.replay, from: options.partitionedReplayFrom }),
  });
  log.info(rebuilt, 'state rebuilt from the ledger');
  // In the background: trees behind their ledger (stored up to a whole stripe; none yet on a data
  // dir from before them) read the rows they lack.
  const treesStarted = performance.now();
  const treesCaughtUp = feedTrees ? trees.catchUpAll().then(() => log.info({ ms: Math.round(performance.now() - treesStarted) }, 'Merkle trees caught up with the ledger')) : null;
  // Cluster mode: keyed reads are answered by the org's owner, as its writes are.
  // Cluster mode: what a node answers locally of an org it may not own waits for its projections.
  const settled = projectionsSettled(store.ledger, directory);
  const reads =
    cluster === null ? undefined : new KeyedReads({ node: cluster.config.node, owns: (org) => cluster.owns(org), caughtUp: (org) => cluster.caughtUp(org), settled, commands, registry, log });
  if (cluster === null) commands.serve(ownerHandler(actors, deliveries), { owns: () => true });
  else {
    // Public reads answer from the records the orgs' owners publish, never from a forward (the
    // log's tiles and proofs excepted: they read the owner's tree).
    cluster.publishPublicRecords(directory);
    cluster.serve(actors, deliveries, reads);
  }
  // Checkpoints now and then bound the replay after a crash; a clean stop saves them too.
  let saved = new Map<string, number>();
  let saving: Promise<unknown> = Promise.resolve();
  const checkpoint = (drain: boolean): Promise<unknown> =>
    (saving = saving
      .then(async () => {
        saved = await saveCheckpoints(store.snapshots, projections, actors, digest, () => new Date(), saved, drain);
        await deliveries.saveCursors();
        await cluster?.replica.saveWatermark();
      })
      .catch((error: unknown) => log.error({ err: ensureError(error) }, 'checkpoint failed')));
  const timer = setInterval(() => void checkpoint(false), config.checkpointSeconds * 1000);
  timer.unref();
  // One soon after start too: a process that keeps crashing before its first interval would
  // otherwise replay its whole ledger on every start.
  const first = setTimeout(() => void checkpoint(false), 1000);
  first.unref();
  opened.push(() => {
    clearInterval(timer);
    clearTimeout(first);
  });

  let studio: Studio | null = null;
  let checkpoints: LogCheckpoints | null = null;
  // Signed off the request path: a new checkpoint a second for each org whose tree grew.
  const signing = setInterval(() => checkpoints?.tick(), 1000);
  signing.unref();
  opened.push(() => clearInterval(signing));
  // Listening first gives the port actually bound: URLs built from it (public records, deploy
  // endpoints, pages) name that port even when VIGIL_PORT is 0.
  let listening = false;
  const http = await startHttpServer(config.host, config.port, log, async (port) => {
    listening = true;
    const served = withBoundPort(config, port);
    const host = new URL(served.baseUrl).host;
    const origin = cluster === null ? loadLogOrigin(config.dataDir, host) : await cluster.logOrigin(host).then((agreed) => ({ host: agreed, differs: agreed !== host }));
    // The partition map names each owner by its own URL: by default known only now that the port is bound.
    cluster?.leases.advertise(cluster.config.url ?? served.baseUrl);
    if (origin.differs) log.warn({ log_origin: origin.host, base_url_host: host }, 'the transparency log keeps the name it was given on first start (the log-origin file in the data dir; in cluster mode, the cluster\'s), not the base URL\'s host');
    checkpoints = new LogCheckpoints(trees, logKey, origin.host, log, cluster?.stores.checkpoints ?? null);
    // Every org's first checkpoint signed as soon as its tree is whole, not by the first request for it.
    void treesCaughtUp?.then(() => checkpoints?.tick());
    studio = served.demo
      ? await Studio.start({
          commands,
          directory,
          store: cluster?.stores.studioAgents ?? new LmdbStudioAgentStore(store.env),
          model: served.llm === null ? new TemplateModel() : new OpenAiCompatibleModel(served.llm),
          baseUrl: served.baseUrl,
          seedOrgs: registryStore.listOrgs().map((org) => org.slug),
          now,
          log,
        })
      : null;
    return {
      config: served,
      log,
      mode,
      cluster: cluster === null ? undefined : { node: cluster.config.node, partitionsOwned: () => cluster.partitionsOwned(), map: () => partitionMap(cluster.leases.ownerUrls()) },
      caughtUp: cluster === null ? undefined : (org: string) => cluster.caughtUp(org),
      settled: cluster === null ? undefined : settled,
      reads,
      commands,
      registry,
      ledger: store.ledger,
      directory,
      publicRecords: new PublicRecords(cluster?.stores.publicRecords ?? directorySources(directory), served.appUrl, digest),
      reviews,
      webhooks,
      webhookStore,
      deliveries,
      meter,
      exportLog,
      transparency: { trees, checkpoints },
      studio,
      scoringKeys: cluster?.stores.scoringKeys ?? new LmdbScoringKeyStore(store.env),
      now,
      metrics: metrics === null || config.metrics === null ? null : { metrics, token: config.metrics.token },
      intake: IntakePacer.bounded(config.maxPendingPerOrg),
      verifyChain: (org, length, agentId, watchHead) => verifyChain(store.ledger, org, length, agentId, watchHead),
    };
  }).catch((error: unknown) => {
    // The deps are only made once the port is bound: a failure before that is the listen itself.
    if (listening) throw error;
    throw new StartError('listen_failed', `cannot listen on ${config.host}:${config.port}: the port is in use, or the host is not an address of this machine (VIGIL_HOST, VIGIL_PORT)`, { cause: error });
  });
  log.info({ port: http.port, host: config.host, mode, ...(cluster === null ? {} : { node: cluster.config.node }), data_dir: config.dataDir, durability: config.durability, pid: process.pid }, 'listening');
  return {
    port: http.port,
    mode,
    firstKey,
    routes: http.routes,
    async close() {
      try {
        http.close();
        clearInterval(timer);
        clearInterval(signing);
        clearTimeout(first);
        await studio?.close();
        clearInterval(usesTimer);
        await flushUses();
        await checkpoint(true);
        await deliveries.close();
        log.info({ consumers: saved.size }, 'checkpoints saved');
        await closeVerifyWorkers();
        if (cluster !== null) await cluster.close();
        else await commands.close();
        await local.close();
        await trees.close();
        await merkleStore.close();
        await store.close();
      } finally {
        lock.release();
      }
    },
  };
}

/** The admin key created on a first start with an empty data dir, or null. Never logged: secrets stay out of logs. */
async function bootstrap(config: Config, store: RegistryStore, registry: Registry): Promise<string | null> {
  if (config.bootstrap !== undefined) {
    await registry.ensureKey(config.bootstrap.org, config.bootstrap.key, 'bootstrap');
    return null;
  }
  if (!store.isEmpty()) return null;
  await registry.ensureOrg('default');
  const created = await registry.createKey('default', Scope, 'first-start admin');
  return created.key;
}
