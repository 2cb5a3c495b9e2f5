import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentDirectory } from '../../src/actors/agent-directory.js';
import { projectionsSettled } from '../../src/actors/projections-settled.js';
import { GENESIS_HASH, makeRow, type LedgerRow } from '../../src/domain/ledger.js';
import { VigilError } from '../../src/errors.js';
import { openLmdb } from '../../src/store/lmdb.js';
import { tempDir } from '../support/server.js';

/**
 * The wait a local answer of an org this node may not own makes after its catch-up: until the
 * projections have taken the rows the real LMDB ledger holds, else 503.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function rows(n: number): LedgerRow[] {
  const made: LedgerRow[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const row = makeRow(prev, seq, 'event', '2026-11-24T00:00:00.000Z', 'a', { seq });
    made.push(row);
    prev = row.chainHash;
  }
  return made;
}

describe('projectionsSettled', () => {
  it('waits until the directory has taken the rows the ledger holds, and says 503 past its bound', async () => {
    const dir = tempDir('vigil-settled-');
    dirs.push(dir);
    const stores = openLmdb(dir);
    try {
      const held = rows(5);
      expect(await stores.ledger.commit('acme', held, 0)).toBe(true);
      const directory = new AgentDirectory();
      directory.onCommitted('acme', held.slice(0, 3));
      const settled = projectionsSettled(stores.ledger, directory, 200);
      await expect(settled('nobody')).resolves.toBeUndefined();
      const refused = await settled('acme').then(
        () => null,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(VigilError);
      expect(refused).toMatchObject({ code: 'unavailable' });
      let done = false;
      const waiting = settled('acme').then(() => (done = true));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(done).toBe(false);
      directory.onCommitted('acme', held.slice(3));
      await waiting;
      expect(done).toBe(true);
    } finally {
      await stores.close();
    }
  });
});
