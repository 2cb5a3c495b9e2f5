import { parentPort, workerData } from 'node:worker_threads';
import { LmdbStore } from '../store/lmdb.js';
import { replayPart, type OrgRebuild, type PartJob } from './partitioned-replay.js';

/** Worker thread: replays one part of a partitioned start-up replay (read-only), posts it, exits. */
const { job } = workerData as { job: PartJob };
const store = new LmdbStore(job.dir, 'process', { readOnly: true });
let message: { states: OrgRebuild[] } | { error: string };
try {
  message = { states: replayPart(store, job.jobs, job.part, job.parts, job.policy) };
} catch (error) {
  message = { error: String(error) };
}
await store.close();
parentPort!.postMessage(message);
