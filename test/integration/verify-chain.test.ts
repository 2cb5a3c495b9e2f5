import { open } from 'lmdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GENESIS_HASH, makeRow, type LedgerRow } from '../../src/domain/ledger.js';
import { LmdbEnv } from '../../src/store/lmdb-env.js';
import { LmdbLedger } from '../../src/store/lmdb-ledger.js';

/** The ledger table of `dir`, and how to close it. */
function ledgerOf(dir: string): LmdbLedger & { close(): Promise<void> } {
  const env = new LmdbEnv(dir, 'process');
  return Object.assign(new LmdbLedger(env), { close: () => env.close() });
}
import { verifyChain } from '../../src/store/verify-chain.js';
import { removeDir, tempDir } from '../support/server.js';

/**
 * One mode only, by nature: no server runs here. verifyChain is checked over an LMDB ledger table
 * this file writes and damages itself, a node's files in either mode. The route over it, GET
 * /audit/{agent_id}/verify, runs in both modes in audit.test.ts (in cluster mode over a node's
 * replica of the stream).
 */
const N = 6000;
let dir: string;
let heads: Buffer[];

beforeAll(async () => {
  dir = tempDir('vigil-verify-');
  const store = ledgerOf(dir);
  heads = [];
  let prev = GENESIS_HASH;
  let batch: LedgerRow[] = [];
  for (let seq = 1; seq <= N; seq++) {
    const row = makeRow(prev, seq, 'event', '2026-11-22T00:00:00.000Z', seq % 3 === 0 ? 'x' : 'y', { seq });
    heads.push(row.chainHash);
    prev = row.chainHash;
    batch.push(row);
    if (batch.length === 1000) {
      await store.commit('o', batch, batch[0]!.seq - 1);
      batch = [];
    }
  }
  await store.close();
});
afterAll(() => removeDir(dir));

describe('verifyChain over worker threads', () => {
  it('gives the same report in parallel slices as inline', async () => {
    const store = ledgerOf(dir);
    try {
      const inline = await verifyChain(store, 'o', N, 'x', heads[4321]!);
      const parallel = await verifyChain(store, 'o', N, 'x', heads[4321]!, 1000);
      expect(parallel).toEqual(inline);
      expect(inline).toMatchObject({ ok: true, length: N, agent_records: N / 3, first_bad_seq: null, watched_seq: 4322, head: heads[N - 1]!.toString('hex') });
    } finally {
      await store.close();
    }
  });

  it('names the first bad seq when a row in a later slice was rewritten', async () => {
    const env = open({ path: dir, maxDbs: 16 });
    const ledger = env.openDB<Buffer, [string, number]>({ name: 'ledger', encoding: 'binary' });
    const row = Buffer.from(ledger.get(['o', 4500])!);
    row.write('{"seq":4501}', row.indexOf('{"seq":4500}'));
    await ledger.put(['o', 4500], row);
    await env.close();
    const store = ledgerOf(dir);
    try {
      const parallel = await verifyChain(store, 'o', N, null, null, 1000);
      expect(parallel).toMatchObject({ ok: false, first_bad_seq: 4500 });
      expect(await verifyChain(store, 'o', N, null, null)).toMatchObject({ ok: false, first_bad_seq: 4500 });
    } finally {
      await store.close();
    }
  });

  it('names the position of a row removed from the middle, inline and in slices', async () => {
    const env = open({ path: dir, maxDbs: 16 });
    const ledger = env.openDB<Buffer, [string, number]>({ name: 'ledger', encoding: 'binary' });
    await ledger.remove(['o', 2000]);
    await env.close();
    const store = ledgerOf(dir);
    try {
      // The later rewrite at 4500 is still there: the earliest break is the one reported.
      expect(await verifyChain(store, 'o', N, null, null)).toMatchObject({ ok: false, first_bad_seq: 2000, length: N - 1 });
      expect(await verifyChain(store, 'o', N, null, null, 1000)).toMatchObject({ ok: false, first_bad_seq: 2000 });
    } finally {
      await store.close();
    }
  });
});
