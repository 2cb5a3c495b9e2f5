/**
 * Holds an LMDB environment's write lock from a process of its own, as another writer's long
 * transaction would: `node --import tsx test/support/lmdb-write-lock.ts <dir> <release file>`.
 * Opens `<dir>` (an environment another process has open), begins a write transaction, prints
 * `locked`, and keeps it open until `<release file>` exists (or 30 s pass); then it ends the
 * transaction without writing and exits. LMDB lets one write transaction at a time in an
 * environment across processes, so the other process's writes queue meanwhile.
 */
import { existsSync } from 'node:fs';
import { open } from 'lmdb';

const [dir, release] = process.argv.slice(2);
const root = open({ path: dir!, noSubdir: false, maxDbs: 32, mapSize: 2 * 1024 ** 3 });
const pause = new Int32Array(new SharedArrayBuffer(4));
root.transactionSync(() => {
  process.stdout.write('locked\n');
  const until = Date.now() + 30_000;
  while (!existsSync(release!) && Date.now() < until) Atomics.wait(pause, 0, 0, 2);
});
await root.close();
