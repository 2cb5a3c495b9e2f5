import { afterAll, describe, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { KvRegistryStore } from '../../src/nats/kv-registry-store.js';
import { KvScoringKeyStore } from '../../src/nats/kv-scoring-key-store.js';
import { KvStudioAgentStore } from '../../src/nats/kv-studio-agent-store.js';
import { silentLogger } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';
import { runRegistryStoreContract } from './registry-store.case.js';
import { runScoringKeyStoreContract } from './scoring-key-store.case.js';
import { runStudioAgentStoreContract } from './studio-agent-store.case.js';
import type { StoreHarness } from './store-harness.js';

/**
 * The store contracts on real nats-servers: one server set per cluster size for the whole file
 * (started on first use), per case buckets of its own, deleted afterwards. The first store and
 * each `other` have a connection of their own, to node 0, 1, 2… in turn: another node.
 */
const sizes = [
  { nodes: 1, replicas: 1 },
  { nodes: 3, replicas: 3 },
] as const;

interface Closable {
  close(): Promise<void>;
}

let cases = 0;

if (natsAvailable('KV store contracts')) {
  for (const { nodes, replicas } of sizes) {
    let servers: Promise<NatsServers> | null = null;
    afterAll(async () => {
      await (await servers)?.stop();
    });
    /** Opens stores over buckets named for one case; `buckets` are deleted with it. */
    const kvHarness = async <S extends Closable>(names: (n: number) => string[], open: (nc: NatsConnection, buckets: string[]) => Promise<S>): Promise<StoreHarness<S>> => {
      servers ??= startNats({ nodes });
      const { urls } = await servers;
      const buckets = names(++cases);
      const connections: NatsConnection[] = [];
      const stores: S[] = [];
      const openOn = async (): Promise<S> => {
        const nc = await connect({ servers: urls[connections.length % urls.length]! });
        connections.push(nc);
        const store = await open(nc, buckets);
        stores.push(store);
        return store;
      };
      return {
        store: await openOn(),
        other: openOn,
        async dispose() {
          for (const store of stores) await store.close();
          const jsm = await jetstreamManager(connections[0]!);
          for (const bucket of buckets) await jsm.streams.delete(`KV_${bucket}`);
          for (const nc of connections) await nc.close();
        },
      };
    };
    const options = { replicas, log: silentLogger() };
    const label = (adapter: string) => `${adapter} (${nodes} node${nodes > 1 ? 's' : ''}, R${replicas})`;

    runRegistryStoreContract(label('KvRegistryStore'), () =>
      kvHarness((n) => [`orgs_${n}`, `keys_${n}`], (nc, [orgs, keys]) => KvRegistryStore.open(nc, { ...options, buckets: { orgs: orgs!, keys: keys! } })),
    );
    runScoringKeyStoreContract(label('KvScoringKeyStore'), () =>
      kvHarness((n) => [`scoring_${n}`, `uses_${n}`], (nc, [keys, uses]) => KvScoringKeyStore.open(nc, { ...options, buckets: { keys: keys!, uses: uses! } })),
    );
    runStudioAgentStoreContract(label('KvStudioAgentStore'), () =>
      kvHarness((n) => [`studio_${n}`], (nc, [bucket]) => KvStudioAgentStore.open(nc, { ...options, bucket: bucket! })),
    );
  }
} else {
  describe('KV store contracts', () => {
    it.skip('needs nats-server (skipped loudly above)', () => {});
  });
}
