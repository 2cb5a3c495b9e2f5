/**
 * Holds an LMDB environment's write lock from a process of its own, as another writer's long
 * transaction would: `node --import tsx test/support/lmdb-write-lock.ts <dir>`. Opens `<dir>` (an
 * environment another process has open, with its options), begins a write transaction, prints
 * `locked`, and keeps it open until its stdin ends (closed by the parent, or the parent gone);
 * then it ends the transaction without writing (LMDB then writes nothing) and exits. LMDB lets one
 * write transaction at a time in an environment across processes, so the other's writes queue.
 */
import { readSync } from 'node:fs';
import { open } from 'lmdb';
import { lmdbOptions } from '../../src/store/lmdb-env.js';

const root = open(lmdbOptions(process.argv[2]!, false));
root.transactionSync(() => {
  process.stdout.write('locked\n');
  const buffer = Buffer.alloc(64);
  // Blocks until the parent closes our stdin (EOF) or dies.
  for (;;) {
    try {
      if (readSync(0, buffer) === 0) break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') break;
    }
  }
});
await root.close();
