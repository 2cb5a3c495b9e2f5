import { afterEach, describe, expect, it } from 'vitest';
import { LocalCommandRouter } from '../../src/bus/local-router.js';
import type { ReadForwardCommand } from '../../src/bus/messages.js';
import { ANSWERED_BY, KeyedReads, MAX_FORWARDED_BYTES } from '../../src/http/keyed-reads.js';
import type { Route } from '../../src/http/router.js';
import { silentLogger } from '../../src/log.js';
import { Registry } from '../../src/services/registry.js';
import { openLmdb } from '../../src/store/lmdb.js';
import { removeDir, tempDir } from '../support/server.js';

/**
 * The owner's side of a forwarded read (KeyedReads.serve) on a real registry (LMDB): the answer as
 * the route wrote it, the key checked again there, and an answer too large for one NATS message
 * sent back as such (the asking node then answers it from its own copy).
 */
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function owner(routes: Route[]) {
  const dir = tempDir('vigil-keyed-reads-');
  const stores = openLmdb(dir);
  cleanups.push(async () => {
    await stores.close();
    removeDir(dir);
  });
  const registry = new Registry(stores.registry);
  const key = await registry.createKey('acme', ['admin'], 'reader');
  const record = registry.authenticate(`Bearer ${key.key}`);
  const reads = new KeyedReads({ node: 'node-a', owns: () => true, caughtUp: () => Promise.resolve(), settled: () => Promise.resolve(), commands: new LocalCommandRouter(), registry, log: silentLogger() });
  reads.register(routes);
  const command = (path: string): ReadForwardCommand => ({ type: 'read.forward', org: 'acme', path, params: { id: 'x' }, query: 'a=1', headers: {}, url: '', key: { id: record.id, hash: record.hash } });
  return { reads, registry, key, command };
}

const route = (path: string, handler: Route['handler']): Route => ({ method: 'get', path, auth: 'key', handler });

describe('KeyedReads.serve (the owner of a forwarded read)', () => {
  it('answers as the route wrote it, with the params, query and key it was given, naming the node', async () => {
    const { reads, command } = await owner([route('/things/:id', ({ params, query, key }) => ({ status: 201, body: { id: params.id, a: query.get('a'), org: key.org }, headers: { etag: '"e"' } }))]);
    const reply = await reads.serve(command('/things/:id'));
    expect(reply).toEqual({ ok: true, value: { status: 201, contentType: 'application/json', headers: { etag: '"e"', [ANSWERED_BY]: 'node-a' }, body: JSON.stringify({ id: 'x', a: '1', org: 'acme' }) } });
  });

  it('carries bytes as base64 and an error as the status and body it would have had', async () => {
    const { reads, command } = await owner([
      route('/bytes', () => ({ bytes: Buffer.from([0, 1, 255]), contentType: 'application/octet-stream' })),
      route('/missing', () => {
        throw new Error('boom');
      }),
    ]);
    expect(await reads.serve(command('/bytes'))).toMatchObject({ ok: true, value: { status: 200, body: Buffer.from([0, 1, 255]).toString('base64'), base64: true } });
    const failed = await reads.serve(command('/missing'));
    expect(failed).toMatchObject({ ok: true, value: { status: 500, contentType: 'application/json', headers: { [ANSWERED_BY]: 'node-a' } } });
  });

  it('refuses a key revoked since the asking node checked it (401), and a route it does not serve (503)', async () => {
    const { reads, registry, key, command } = await owner([route('/things/:id', () => ({ body: {} }))]);
    expect(await reads.serve(command('/nowhere'))).toMatchObject({ ok: true, value: { status: 503 } });
    await registry.revokeKey(key.id);
    const refused = await reads.serve(command('/things/:id'));
    expect(refused).toMatchObject({ ok: true, value: { status: 401 } });
    expect(JSON.parse((refused as { value: { body: string } }).value.body).error.message).toBe('this API key was revoked');
  });

  it('says an answer is too large to carry rather than sending it (the asking node answers from its own copy)', async () => {
    const big = 'é'.repeat(MAX_FORWARDED_BYTES / 2 + 1); // under the limit in characters, over it in UTF-8 bytes
    const { reads, command } = await owner([route('/big', () => ({ text: big, contentType: 'text/plain' })), route('/small', () => ({ text: 'é'.repeat(1000), contentType: 'text/plain' }))]);
    expect(await reads.serve(command('/big'))).toEqual({ ok: true, value: { tooLarge: true } });
    expect(await reads.serve(command('/small'))).toMatchObject({ ok: true, value: { status: 200 } });
  });
});
