import { MemoryBus } from '../../src/bus/memory.js';
import { LmdbStore } from '../../src/store/lmdb.js';
import { removeDir, tempDir } from '../support/server.js';
import { runBusContract } from './bus.case.js';
import { silentLogger } from '../support/logs.js';

runBusContract('MemoryBus over LMDB', async () => {
  const dir = tempDir('vigil-bus-');
  const store = new LmdbStore(dir);
  const bus = new MemoryBus(store, silentLogger());
  const extra: LmdbStore[] = [];
  return {
    bus,
    reopen: async () => {
      const again = new LmdbStore(dir);
      extra.push(again);
      return new MemoryBus(again, silentLogger());
    },
    async dispose() {
      await bus.close();
      await store.close();
      for (const s of extra) await s.close();
      removeDir(dir);
    },
  };
});
