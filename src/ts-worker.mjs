// Worker bootstrap: worker threads do not inherit the TypeScript loader, so register it, then
// run the worker module (written in TypeScript) named in workerData.module, relative to src/.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(new URL(workerData.module, import.meta.url).href);
