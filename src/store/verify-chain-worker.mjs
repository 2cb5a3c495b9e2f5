// Worker bootstrap: workers do not inherit the TypeScript loader, so register it, then run the
// worker written in TypeScript.
import { register } from 'tsx/esm/api';

register();
await import('./verify-chain-worker.ts');
