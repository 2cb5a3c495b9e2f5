import { LmdbStudioAgentStore, MemoryStudioAgentStore } from '../../src/demo/studio-store.js';
import { LmdbScoringKeyStore } from '../../src/record-scoring/lmdb-key-store.js';
import { LmdbEnv } from '../../src/store/lmdb-env.js';
import { LmdbRegistryStore } from '../../src/store/lmdb-registry.js';
import { removeDir, tempDir } from '../support/server.js';
import { runRegistryStoreContract } from './registry-store.case.js';
import { runScoringKeyStoreContract } from './scoring-key-store.case.js';
import { runStudioAgentStoreContract } from './studio-agent-store.case.js';
import type { StoreHarness } from './store-harness.js';

/** A fresh data dir; `other` opens the environment again, as a second process on the dir would. */
function lmdbHarness<S>(open: (env: LmdbEnv) => S): Promise<StoreHarness<S>> {
  const dir = tempDir('vigil-stores-');
  const envs = [new LmdbEnv(dir)];
  return Promise.resolve({
    store: open(envs[0]!),
    other: () => {
      const env = new LmdbEnv(dir);
      envs.push(env);
      return Promise.resolve(open(env));
    },
    async dispose() {
      for (const env of envs.reverse()) await env.close();
      removeDir(dir);
    },
  });
}

runRegistryStoreContract('LmdbRegistryStore', () => lmdbHarness((env) => new LmdbRegistryStore(env)));
runScoringKeyStoreContract('LmdbScoringKeyStore', () => lmdbHarness((env) => new LmdbScoringKeyStore(env)));
runStudioAgentStoreContract('LmdbStudioAgentStore', () => lmdbHarness((env) => new LmdbStudioAgentStore(env)));
runStudioAgentStoreContract('MemoryStudioAgentStore', () => {
  const store = new MemoryStudioAgentStore();
  // One process holds it: the "other" store is the same one.
  return Promise.resolve({ store, other: () => Promise.resolve(store), dispose: () => Promise.resolve() });
});
