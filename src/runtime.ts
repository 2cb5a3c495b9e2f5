import { AgentDirectory } from './actors/agent-directory.js';
import { newerThan, restoreCheckpoints, saveCheckpoints } from './actors/checkpoints.js';
import { OrgActors } from './actors/org-actors.js';
import { PublicRecords } from './actors/public-records.js';
import type { Bus } from './bus/bus.js';
import { MemoryBus } from './bus/memory.js';
import type { Config } from './config.js';
import { POLICY_V1, policyDigest } from './domain/policy.js';
import { Scope } from './domain/schemas.js';
import { startHttpServer } from './http/server.js';
import { Registry } from './registry.js';
import { LmdbStore } from './store/lmdb.js';
import { closeVerifyWorkers, verifyChain } from './store/verify-chain.js';

export interface Runtime {
  port: number;
  mode: 'embedded' | 'cluster';
  /** The admin key created on a first start with an empty data dir, printed once. */
  firstKey: string | null;
  close(): Promise<void>;
}

export interface Log {
  (level: 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>): void;
}

export const jsonLog: Log = (level, msg, fields) => {
  const line = JSON.stringify({ level, time: new Date().toISOString(), msg, ...fields });
  if (level === 'error') console.error(line);
  else console.log(line);
};

/** The composition root: picks the adapters for the mode and starts actors and the front end. */
export async function startRuntime(config: Config, log: Log = jsonLog): Promise<Runtime> {
  if (config.natsUrl !== undefined) {
    throw new Error('cluster mode (VIGIL_NATS_URL) is not available in this version; unset it to run embedded');
  }
  const now = (): number => Date.now();
  const store = new LmdbStore(config.dataDir, config.durability);
  const registry = new Registry(store);
  const firstKey = await bootstrap(config, store, registry, log);

  const bus: Bus = new MemoryBus(store);
  const digest = policyDigest(POLICY_V1);
  const actors = new OrgActors(bus, {
    policy: POLICY_V1,
    policyDigest: digest,
    now,
    maxPending: config.maxPendingPerOrg,
  });
  bus.serve(actors.handle);
  const directory = new AgentDirectory();
  const started = performance.now();
  // Checkpoints seed the state; one pass over the rest of the ledger rebuilds the projections
  // and the org writers alike.
  const restored = restoreCheckpoints(store, directory, actors, digest);
  let replaying = true;
  await bus.subscribe(
    (org, rows) => {
      if (!replaying) return directory.onCommitted(org, rows);
      const forDirectory = newerThan(rows, restored.directory.get(org));
      if (forDirectory.length > 0) directory.onCommitted(org, forDirectory);
      const forWriter = newerThan(rows, restored.writer.get(org));
      if (forWriter.length > 0) actors.onReplay(org, forWriter);
    },
    { after: restored.after },
  );
  replaying = false;
  actors.finishReplay();
  log('info', 'state rebuilt from the ledger', {
    ms: Math.round(performance.now() - started),
    checkpoints: restored.writer.size + restored.directory.size,
  });
  // Checkpoints now and then bound the replay after a crash; a clean stop saves them too.
  let saved = new Map<string, number>();
  let saving: Promise<unknown> = Promise.resolve();
  const checkpoint = (drain: boolean): Promise<unknown> =>
    (saving = saving
      .then(async () => {
        saved = await saveCheckpoints(store, directory, actors, digest, () => new Date(), saved, drain);
      })
      .catch((error: unknown) => log('error', 'checkpoint failed', { error: String(error) })));
  const timer = setInterval(() => void checkpoint(false), config.checkpointSeconds * 1000);
  timer.unref();

  const publicRecords = new PublicRecords(directory, config.appUrl, digest);
  const http = await startHttpServer({
    config,
    mode: 'embedded',
    bus,
    registry,
    ledger: store,
    directory,
    publicRecords,
    now,
    verifyChain: (org, length, agentId, watchHead) => verifyChain(store, org, length, agentId, watchHead),
  });
  log('info', 'listening', { port: http.port, host: config.host, mode: 'embedded', data_dir: config.dataDir, durability: config.durability });
  return {
    port: http.port,
    mode: 'embedded',
    firstKey,
    async close() {
      http.close();
      clearInterval(timer);
      await checkpoint(true);
      log('info', 'checkpoints saved', { consumers: saved.size });
      await closeVerifyWorkers();
      await bus.close();
      await store.close();
    },
  };
}

async function bootstrap(config: Config, store: LmdbStore, registry: Registry, log: Log): Promise<string | null> {
  if (config.bootstrap !== undefined) {
    await registry.ensureKey(config.bootstrap.org, config.bootstrap.key, 'bootstrap');
    return null;
  }
  if (!store.isEmpty()) return null;
  await registry.ensureOrg('default');
  const created = await registry.createKey('default', Scope, 'first-start admin');
  log('info', 'first start: created org "default" and an admin key (shown once)', { org: 'default', key: created.key });
  return created.key;
}
