import { DEMO_OPERATIONS } from './demo-operations.js';
import { LEDGER_OPERATIONS } from './ledger-operations.js';
import type { Operation } from './operation.js';
import { OVERSIGHT_OPERATIONS } from './oversight-operations.js';
import { PUBLIC_OPERATIONS } from './public-operations.js';
import { SYSTEM_OPERATIONS } from './system-operations.js';

/**
 * What GET /openapi.json says of each route, by `'<METHOD> <path>'` as the route is mounted (a
 * collection's trailing-slash twin shares its entry). Also the routes that are not Routes or not
 * always mounted: the WebSocket GET /events/stream, GET /metrics (with VIGIL_METRICS_TOKEN), and
 * the demo routes (VIGIL_DEMO=1).
 */
export const OPERATIONS: Readonly<Record<string, Operation>> = Object.freeze({
  ...SYSTEM_OPERATIONS,
  ...LEDGER_OPERATIONS,
  ...OVERSIGHT_OPERATIONS,
  ...PUBLIC_OPERATIONS,
  ...DEMO_OPERATIONS,
});
