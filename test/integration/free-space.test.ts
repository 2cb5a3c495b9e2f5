import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { GENESIS_HASH, makeRow } from '../../src/domain/ledger.js';
import { openLmdb } from '../../src/store/lmdb.js';
import { tempDir } from '../support/server.js';

/** The free-space floor over real LMDB files and the real disk's statfs. */
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('writes below the free-space floor', () => {
  it('are refused before LMDB sees them (503, retry), and change nothing', async () => {
    const dir = tempDir('vigil-floor-');
    dirs.push(dir);
    const row = makeRow(GENESIS_HASH, 1, 'event', '2026-11-25T00:00:00.000Z', 'a', { i: 1 });
    // No disk has a petabyte free.
    const full = openLmdb(dir, 'sync', { minFreeBytes: 1024 ** 5 });
    await expect(full.ledger.commit('acme', [row], 0)).rejects.toMatchObject({ code: 'unavailable', retryAfterSeconds: 1 });
    await expect(full.snapshots.putSnapshot('writer', 'acme', { seq: 1 } as never)).rejects.toMatchObject({ code: 'unavailable' });
    expect(full.ledger.last('acme')).toBeUndefined();
    await full.close();
    const roomy = openLmdb(dir, 'sync', { minFreeBytes: 1024 * 1024 });
    expect(roomy.ledger.last('acme')).toBeUndefined();
    expect(await roomy.ledger.commit('acme', [row], 0)).toBe(true);
    expect(roomy.ledger.last('acme')?.seq).toBe(1);
    await roomy.close();
  });
});
