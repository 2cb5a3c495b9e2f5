/**
 * Quick ingest measurement (the full peer benchmark comes with the bench issue): starts Vigil
 * embedded in a temp dir, registers an agent, and drives POST /events/ with autocannon.
 */
import autocannon from 'autocannon';
import { loadConfig } from '../src/config.js';
import { startRuntime } from '../src/runtime.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const KEY = 'vgl_bench-key-0123456789abcdefghijklmnopqrstuvwxyz';
const quick = process.argv.includes('--quick');
const dir = mkdtempSync(join(tmpdir(), 'vigil-bench-'));
const runtime = await startRuntime(
  loadConfig({ VIGIL_PORT: '0', VIGIL_DATA_DIR: dir, VIGIL_BOOTSTRAP_ORG: 'bench', VIGIL_BOOTSTRAP_KEY: KEY }),
  () => {},
);
const url = `http://127.0.0.1:${runtime.port}`;
const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
try {
  await fetch(`${url}/agents/`, { method: 'POST', headers, body: JSON.stringify({ agent_id: 'bench-agent', name: 'Bench' }) });
  const result = await autocannon({
    url: `${url}/events/`,
    method: 'POST',
    headers,
    body: JSON.stringify({ agent_id: 'bench-agent', event_type: 'output_generated', payload: { content_length: 512 }, dti: 0.1 }),
    connections: 64,
    duration: quick ? 5 : 15,
  });
  const errors = result.errors + result.non2xx + result.timeouts;
  console.log(`POST /events/ (durable, 64 connections): ${Math.round(result.requests.average)} req/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, errors ${errors}`);
} finally {
  await runtime.close();
  rmSync(dir, { recursive: true, force: true });
}
