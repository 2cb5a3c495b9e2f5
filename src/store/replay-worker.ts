import { parentPort, workerData } from 'node:worker_threads';
import { LmdbEnv } from './lmdb-env.js';
import { LmdbLedger } from './lmdb-ledger.js';
import type { OrgRebuild } from '../actors/rebuild.js';
import { replayPart, type PartJob } from './partitioned-replay.js';

/** Worker thread: replays one part of a partitioned start-up replay (read-only), posts it, exits. */
const { job } = workerData as { job: PartJob };
const env = new LmdbEnv(job.dir, 'process', { readOnly: true });
const store = new LmdbLedger(env);
let message: { states: OrgRebuild[] } | { error: string };
try {
  message = { states: replayPart(store, job.jobs, job.part, job.parts, job.policy) };
} catch (error) {
  message = { error: String(error) };
}
await env.close();
parentPort!.postMessage(message);
