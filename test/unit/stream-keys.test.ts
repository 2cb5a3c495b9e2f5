import { afterEach, describe, expect, it } from 'vitest';
import { KEY_FORBIDDEN, KEY_REVOKED, StreamKeyWatch, type KeyClose } from '../../src/http/stream-keys.js';
import { Registry } from '../../src/services/registry.js';
import { LmdbEnv } from '../../src/store/lmdb-env.js';
import { LmdbRegistryStore } from '../../src/store/lmdb-registry.js';
import { silentLogger } from '../support/logs.js';
import { removeDir, tempDir } from '../support/server.js';

/** StreamKeyWatch over a real LMDB registry: what a stream's key may still do, and the sweep that closes idle streams. */
describe('StreamKeyWatch', () => {
  const opened: { env: LmdbEnv; dir: string }[] = [];
  afterEach(async () => {
    for (const { env, dir } of opened.splice(0)) {
      await env.close();
      removeDir(dir);
    }
  });

  async function setUp(everyMs?: number) {
    const dir = tempDir('vigil-stream-keys-');
    const env = new LmdbEnv(dir);
    opened.push({ env, dir });
    const store = new LmdbRegistryStore(env);
    const registry = new Registry(store);
    await registry.ensureOrg('acme');
    const created = await registry.createKey('acme', ['events:write'], 'runtime');
    const key = registry.authenticate(`Bearer ${created.key}`);
    return { store, registry, key, watch: new StreamKeyWatch(registry, 'events:write', silentLogger(), everyMs) };
  }

  it('lets a key write while it holds the scope; revoked: 4401, without the scope: 4403', async () => {
    const { store, registry, key, watch } = await setUp();
    expect(watch.check(key)).toBeNull();
    await store.putKey({ ...key, scopes: ['review'] });
    expect(watch.check(key)).toEqual(KEY_FORBIDDEN);
    await registry.revokeKey(key.id);
    expect(watch.check(key)).toEqual(KEY_REVOKED);
    expect(KEY_REVOKED).toEqual({ code: 4401, reason: 'key revoked' });
  });

  it('closes an idle stream whose key is revoked at its next sweep, and leaves the streams of other keys open', async () => {
    const { registry, key, watch } = await setUp(20);
    const other = await registry.createKey('acme', ['events:write'], 'other');
    const ends: KeyClose[] = [];
    const revokedStream = { key, end: (close: KeyClose) => void (ends.push(close), watch.delete(revokedStream)) };
    const otherStream = { key: registry.authenticate(`Bearer ${other.key}`), end: () => expect.fail('its key is valid') };
    watch.add(revokedStream);
    watch.add(otherStream);
    await registry.revokeKey(key.id);
    const deadline = Date.now() + 2_000;
    while (ends.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(ends).toEqual([KEY_REVOKED]);
    expect(watch.size).toBe(1);
    watch.delete(otherStream);
    expect(watch.size).toBe(0);
  });
});
