import { parentPort, workerData } from 'node:worker_threads';
import { LmdbStore } from './lmdb.js';
import { verifySlice, type SliceJob } from './verify-chain.js';

/** Worker thread: verifies one slice of an org's chain, read-only, and posts its report. */
const job = workerData as SliceJob;
const store = new LmdbStore(job.dir, 'process', { readOnly: true });
const check = await verifySlice(store, { ...job, watchHead: job.watchHead === null ? null : Buffer.from(job.watchHead) });
parentPort!.postMessage(check);
