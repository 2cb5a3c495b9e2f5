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

describe('KeyedReads: public log reads and answers too large to carry', () => {
  it('serves a read without a key only by a public log route\'s owner side, never by a keyed route, and does not catch up for it', async () => {
    const dir = tempDir('vigil-keyed-reads-');
    const stores = openLmdb(dir);
    cleanups.push(async () => {
      await stores.close();
      removeDir(dir);
    });
    const caughtUp: string[] = [];
    const reads = new KeyedReads({ node: 'node-a', owns: () => true, caughtUp: (org) => (caughtUp.push(org), Promise.resolve()), settled: () => Promise.resolve(), commands: new LocalCommandRouter(), registry: new Registry(stores.registry), log: silentLogger() });
    const logRoute: Route = { method: 'get', path: '/public/log/:org', auth: 'none', handler: () => ({ status: 429, body: {} }), owner: ({ params }) => ({ text: `log of ${params.org}`, contentType: 'text/plain', headers: { 'cache-control': 'no-cache' } }) };
    reads.register([route('/things/:id', () => ({ body: { secret: true } })), logRoute]);
    const keyless = (path: string): ReadForwardCommand => ({ type: 'read.forward', org: 'acme', path, params: { org: 'acme', id: 'x' }, query: '', headers: {}, url: '' });
    expect(await reads.serve(keyless('/public/log/:org'))).toEqual({ ok: true, value: { status: 200, contentType: 'text/plain', headers: { 'cache-control': 'no-cache', [ANSWERED_BY]: 'node-a' }, body: 'log of acme' } });
    expect(await reads.serve(keyless('/things/:id'))).toMatchObject({ ok: true, value: { status: 503 } });
    expect(caughtUp).toEqual([]);
  });

  it('answers a read too large to carry here only once this node\'s projections have taken what the catch-up brought', async () => {
    const dir = tempDir('vigil-keyed-reads-');
    const stores = openLmdb(dir);
    cleanups.push(async () => {
      await stores.close();
      removeDir(dir);
    });
    const registry = new Registry(stores.registry);
    const record = registry.authenticate(`Bearer ${(await registry.createKey('acme', ['admin'], 'reader')).key}`);
    // The owner (another node, here the router's one handler) says the answer is too large.
    const commands = new LocalCommandRouter();
    commands.serve(() => Promise.resolve({ ok: true, value: { tooLarge: true } }), { owns: () => true });
    let settle = (): void => {};
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const reads = new KeyedReads({ node: 'node-b', owns: () => false, caughtUp: () => Promise.resolve(), settled: () => settled, commands, registry, log: silentLogger() });
    let ran = 0;
    const big = route('/big', () => ({ body: { n: ++ran } }));
    const ctx = { params: {}, query: new URLSearchParams(), headers: {}, key: record, body: undefined, ip: '', url: '', connection: { aborted: false } };
    const answer = reads.answer(big, ctx);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(ran).toBe(0);
    settle();
    expect(await answer).toEqual({ body: { n: 1 } });
  });
});
