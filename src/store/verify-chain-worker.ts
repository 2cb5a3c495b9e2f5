import { parentPort } from 'node:worker_threads';
import { LmdbEnv } from './lmdb-env.js';
import { LmdbLedger } from './lmdb-ledger.js';
import { verifySlice, type SliceJob } from './verify-chain.js';

/** Worker thread: verifies slices of an org's chain, read-only, one message per job. */
const stores = new Map<string, LmdbLedger>();
parentPort!.on('message', ({ id, job }: { id: number; job: SliceJob }) => {
  let store = stores.get(job.dir);
  if (store === undefined) {
    store = new LmdbLedger(new LmdbEnv(job.dir, 'process', { readOnly: true }));
    stores.set(job.dir, store);
  }
  verifySlice(store, { ...job, watchHead: job.watchHead === null ? null : Buffer.from(job.watchHead) }).then(
    (check) => parentPort!.postMessage({ id, check }),
    (error: unknown) => parentPort!.postMessage({ id, error: String(error) }),
  );
});
