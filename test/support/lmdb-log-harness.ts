import type { LedgerLog } from '../../src/bus/ledger-log.js';
import { openLmdb, type LmdbStores } from '../../src/store/lmdb.js';
import { LmdbLedgerLog } from '../../src/store/lmdb-ledger-log.js';
import { removeDir, tempDir } from '../support/server.js';
import { silentLogger } from '../support/logs.js';
import type { LedgerLogHarness } from '../contract/ledger-log.case.js';

/** A fresh LMDB ledger log in a temp dir, seen through `wrap`. */
export function lmdbLogHarness(wrap: (log: LedgerLog) => LedgerLog = (log) => log): Promise<LedgerLogHarness> {
  const dir = tempDir('vigil-log-');
  const stores = openLmdb(dir);
  const log = wrap(new LmdbLedgerLog(stores.ledger, silentLogger()));
  const extra: LmdbStores[] = [];
  return Promise.resolve({
    log,
    reopen: () => {
      const again = openLmdb(dir);
      extra.push(again);
      return Promise.resolve(wrap(new LmdbLedgerLog(again.ledger, silentLogger())));
    },
    async dispose() {
      await log.close();
      await stores.close();
      for (const s of extra) await s.close();
      removeDir(dir);
    },
  });
}
