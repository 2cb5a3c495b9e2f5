import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { open as lmdbOpen } from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import { MerkleTrees } from '../../src/actors/merkle-trees.js';
import { GENESIS_HASH, leafInput, makeRow, type LedgerRow } from '../../src/domain/ledger.js';
import { consistencyProof, inclusionProof, leafHash, MemoryTree, rootAt } from '../../src/domain/merkle.js';
import { openLmdb, type LmdbStores } from '../../src/store/lmdb.js';
import { MERKLE_DIR, openMerkleStore, type LmdbMerkleStore } from '../../src/store/lmdb-merkle-store.js';
import { inclusionBody } from '../../src/http/routes/inclusion-body.js';
import type { MerkleStore } from '../../src/store/merkle-store.js';
import { captureLogger, silentLogger, type LogLine } from '../support/logs.js';
import { tempDir } from '../support/server.js';

/** Org trees over real LMDB files (DESIGN §10): stored as stripes off the request path, resumed after a restart, caught up with the ledger. */
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function ledger(n: number, agent = 'a'): LedgerRow[] {
  const rows: LedgerRow[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const row = makeRow(prev, seq, 'event', '2026-11-24T00:00:00.000Z', agent, { seq });
    rows.push(row);
    prev = row.chainHash;
  }
  return rows;
}

function reference(rows: readonly LedgerRow[]): MemoryTree {
  const tree = new MemoryTree();
  for (const row of rows) tree.append(leafHash(leafInput(row)));
  return tree;
}

/** Commits rows to the org's ledger in batches, as its writer does. */
/** The LMDB store with some of its methods replaced (to count or fail them). */
function over(lmdb: LmdbMerkleStore, replaced: Partial<MerkleStore>): MerkleStore {
  return {
    stripe: (org, level, index) => lmdb.stripe(org, level, index),
    hash: (org, level, index, slot) => lmdb.hash(org, level, index, slot),
    storedStripes: (org) => lmdb.storedStripes(org),
    put: (stripes, drop) => lmdb.put(stripes, drop),
    ...replaced,
  };
}

async function commit(stores: Stores, org: string, rows: readonly LedgerRow[], batch = 1000): Promise<void> {
  for (let i = 0; i < rows.length; i += batch) expect(await stores.ledger.commit(org, rows.slice(i, i + batch), rows[i]!.seq - 1)).toBe(true);
}

/** A data dir's ledger environment and the trees' own; closing closes both. */
type Stores = LmdbStores & { merkle: LmdbMerkleStore };

function reopen(dir: string): Stores {
  const stores = openLmdb(dir);
  const merkle = openMerkleStore(dir, silentLogger());
  return {
    ...stores,
    merkle,
    close: async () => {
      await merkle.close();
      await stores.close();
    },
  };
}

function open(): { dir: string; stores: Stores } {
  const dir = tempDir('vigil-merkle-');
  dirs.push(dir);
  return { dir, stores: reopen(dir) };
}

describe('Merkle trees of orgs, stored in LMDB', () => {
  it('keeps each org\'s tree as its rows commit, and resumes it from the stored stripes after a restart', async () => {
    const { dir, stores: first } = open();
    const [acme, beta] = [ledger(20_000), ledger(700, 'b')];
    await commit(first, 'acme', acme.slice(0, 15_000));
    await commit(first, 'beta', beta);
    let trees = new MerkleTrees(first.merkle, first.ledger, silentLogger());
    for (let i = 0; i < 15_000; i += 250) trees.onCommitted('acme', acme.slice(i, i + 250));
    trees.onCommitted('beta', beta);
    trees.onCommitted('acme', acme.slice(0, 10)); // rows it holds already: skipped
    await trees.settled();
    expect(rootAt(trees.tree('acme')).equals(rootAt(reference(acme.slice(0, 15_000))))).toBe(true);
    await first.close();

    const stores = reopen(dir);
    await commit(stores, 'acme', acme.slice(15_000));
    trees = new MerkleTrees(stores.merkle, stores.ledger, silentLogger());
    // Stored: whole stripes of 256 leaves; the rest is read from the ledger.
    expect(trees.size('acme')).toBe(Math.floor(15_000 / 256) * 256);
    expect(trees.size('beta')).toBe(512);
    expect(trees.size('nobody')).toBe(0);
    await trees.catchUpAll();
    await trees.settled();
    const full = reference(acme);
    const tree = trees.tree('acme');
    expect(tree.size).toBe(20_000);
    expect(rootAt(tree).equals(rootAt(full))).toBe(true);
    expect(rootAt(trees.tree('beta')).equals(rootAt(reference(beta)))).toBe(true);
    for (const m of [0, 255, 256, 12_345, 19_999]) expect(inclusionProof(tree, m)).toEqual(inclusionProof(full, m));
    expect(consistencyProof(tree, 15_000)).toEqual(consistencyProof(full, 15_000));
    await stores.close();
  });

  it('proves every leaf after a restart whatever the stripe cache holds (levels 0 to 3): a budget of two stripes, none, or all', async () => {
    const { dir, stores: first } = open();
    const [acme, beta] = [ledger(4_096), ledger(4_096, 'b')];
    await commit(first, 'acme', acme);
    await commit(first, 'beta', beta);
    const trees = new MerkleTrees(first.merkle, first.ledger, silentLogger());
    trees.onCommitted('acme', acme);
    trees.onCommitted('beta', beta);
    await trees.settled();
    await first.close();
    const expected = { acme: reference(acme), beta: reference(beta) };
    for (const cacheBytes of [2 * 8192, 0, 64 * 1024 * 1024]) {
      const stores = reopen(dir);
      const resumed = new MerkleTrees(stores.merkle, stores.ledger, silentLogger(), { cacheBytes });
      // Both orgs in turn, so a stripe (or pair) read last for one org is never taken for the other's.
      for (let m = 0; m < 4_096; m += 3) {
        for (const org of ['acme', 'beta'] as const) {
          const tree = resumed.tree(org);
          expect(tree.size).toBe(4_096);
          expect(tree.node(0, m).equals(expected[org].node(0, m)), `${org} leaf ${m}, cache ${cacheBytes}`).toBe(true);
          expect(inclusionProof(tree, m), `${org} leaf ${m}, cache ${cacheBytes}`).toEqual(inclusionProof(expected[org], m));
          // The proof route's body, hex-encoded from wherever the reader holds each hash.
          const body = JSON.parse(inclusionBody(tree, m + 1, 4_096, null).toString('utf8')) as { leaf_hash: string; hashes: string[] };
          expect(body.leaf_hash).toBe(expected[org].node(0, m).toString('hex'));
          expect(body.hashes, `${org} leaf ${m}, cache ${cacheBytes}`).toEqual(inclusionProof(expected[org], m).map((h) => h.toString('hex')));
        }
      }
      await stores.close();
    }
  });

  it('stores live rows\' stripes together after a delay (readable meanwhile), at once when settled or closed', async () => {
    const { stores } = open();
    const lmdb = stores.merkle;
    let writes = 0;
    const store = over(lmdb, { put: (stripes, drop) => (writes++, lmdb.put(stripes, drop)) });
    const rows = ledger(2_048);
    await commit(stores, 'acme', rows);
    // A delay no test waits out: only settled() and close() may cut it short.
    const trees = new MerkleTrees(store, stores.ledger, silentLogger(), { storeDelayMs: 600_000 });
    for (let i = 0; i < 1_024; i += 128) trees.onCommitted('acme', rows.slice(i, i + 128));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect([writes, lmdb.storedStripes('acme')]).toEqual([0, 0]);
    const expected = reference(rows);
    for (const m of [0, 300, 1_023]) expect(inclusionProof(trees.tree('acme'), m, 1_024)).toEqual(inclusionProof(expected, m, 1_024));
    await trees.settled();
    expect([writes, lmdb.storedStripes('acme')]).toEqual([1, 4]);
    for (let i = 1_024; i < 2_048; i += 128) trees.onCommitted('acme', rows.slice(i, i + 128));
    await trees.close();
    expect([writes, lmdb.storedStripes('acme')]).toEqual([2, 8]);
    await stores.close();
  });

  it('keeps a leaf stripe a proof reads while the cache has room; past it, reads the one hash from storage', async () => {
    const { dir, stores: first } = open();
    const rows = ledger(4_096);
    await commit(first, 'acme', rows);
    const filler = new MerkleTrees(first.merkle, first.ledger, silentLogger());
    filler.onCommitted('acme', rows);
    await filler.settled();
    await first.close();
    const stores = reopen(dir);
    const lmdb = stores.merkle;
    const reads: string[] = [];
    const store = over(lmdb, {
      stripe: (org, level, index) => (reads.push(`stripe ${level}/${index}`), lmdb.stripe(org, level, index)),
      hash: (org, level, index, slot) => (reads.push(`hash ${level}/${index}`), lmdb.hash(org, level, index, slot)),
    });
    // Room for one stripe: the first leaf stripe read is kept, the next is read a hash at a time.
    const trees = new MerkleTrees(store, stores.ledger, silentLogger(), { cacheBytes: 8192 });
    const tree = trees.tree('acme');
    reads.length = 0; // what resuming read (the level-4 stripe the levels above it are recomputed from)
    const expected = reference(rows);
    for (const m of [5, 5, 300, 300, 6]) expect(tree.node(0, m).equals(expected.node(0, m)), `leaf ${m}`).toBe(true);
    expect(reads).toEqual(['stripe 0/0', 'hash 0/1', 'hash 0/1']);
    await stores.close();
  });

  it('drops damaged stored stripes and rebuilds the tree from the ledger: found on resume, or by a proof (503 meanwhile)', async () => {
    const { dir, stores: first } = open();
    const rows = ledger(4_096);
    await commit(first, 'acme', rows);
    const trees = new MerkleTrees(first.merkle, first.ledger, silentLogger());
    trees.onCommitted('acme', rows);
    await trees.settled();
    await first.close();
    const full = reference(rows);
    // Stripe 4/0 is read to resume (level 5's open stripe is made from it); stripe 0/3 only by proofs of leaves 768–1023.
    for (const [level, index] of [
      [4, 0],
      [0, 3],
    ] as const) {
      // Removed from the trees' environment, cleanly closed, before the data dir is opened again.
      const raw = lmdbOpen({ path: join(dir, MERKLE_DIR) });
      expect(await raw.openDB<Buffer, [string, number, number]>({ name: 'merkle', encoding: 'binary' }).remove(['acme', level, index])).toBe(true);
      await raw.close();
      const stores = reopen(dir);
      const lines: LogLine[] = [];
      const resumed = new MerkleTrees(stores.merkle, stores.ledger, captureLogger(lines));
      const tree = resumed.tree('acme');
      if (level === 0) {
        expect(() => inclusionProof(tree, 800)).toThrow(/stripe 0\/3 .* missing/);
      }
      expect(resumed.catchingUp('acme'), `stripe ${level}/${index}`).toBe(true);
      expect(lines.some((l) => l.msg.includes('stored stripes are damaged'))).toBe(true);
      await resumed.catchUpAll();
      await resumed.settled();
      expect(resumed.catchingUp('acme')).toBe(false);
      const rebuilt = resumed.tree('acme');
      expect(rebuilt.size).toBe(4_096);
      expect(rootAt(rebuilt).equals(rootAt(full))).toBe(true);
      for (const m of [0, 800, 4_095]) expect(inclusionProof(rebuilt, m)).toEqual(inclusionProof(full, m));
      expect(stores.merkle.stripe('acme', level, index)?.equals(Buffer.concat(Array.from({ length: 256 }, (_, i) => full.node(level, index * 256 + i)))), 'the stripe is stored again').toBe(true);
      await stores.close();
    }
  });

  it('drops stored stripes that are not its ledger\'s (a ledger restored from a backup, another ledger\'s stripes) and rebuilds from the ledger', async () => {
    // Stripes of 1,024 leaves of a ledger, stored in a data dir of their own, then copied beside another ledger.
    const { dir: source, stores: filler } = open();
    const [rows, other] = [ledger(1_024), ledger(1_024, 'b')];
    await commit(filler, 'acme', rows);
    const trees = new MerkleTrees(filler.merkle, filler.ledger, silentLogger());
    trees.onCommitted('acme', rows);
    await trees.settled();
    await filler.close();
    for (const [what, ledgerRows, why] of [
      ['a ledger of 700 rows (restored from a backup)', rows.slice(0, 700), /holds 1024 leaves, the ledger 700 rows/],
      ['another ledger of as many rows', other, /leaf 1024 is not the hash of the ledger's record 1024/],
    ] as const) {
      const { dir, stores: first } = open();
      await commit(first, 'acme', ledgerRows);
      await first.close();
      rmSync(join(dir, MERKLE_DIR), { recursive: true });
      cpSync(join(source, MERKLE_DIR), join(dir, MERKLE_DIR), { recursive: true });
      const stores = reopen(dir);
      expect(stores.merkle.storedStripes('acme'), what).toBe(4);
      const lines: LogLine[] = [];
      const resumed = new MerkleTrees(stores.merkle, stores.ledger, captureLogger(lines));
      resumed.tree('acme');
      expect(resumed.catchingUp('acme'), what).toBe(true);
      expect(String(lines.find((l) => l.msg.includes('stored stripes are damaged'))?.fields?.['error'])).toMatch(why);
      await resumed.catchUpAll();
      await resumed.settled();
      expect(rootAt(resumed.tree('acme')).equals(rootAt(reference(ledgerRows))), what).toBe(true);
      expect(stores.merkle.storedStripes('acme')).toBe(Math.floor(ledgerRows.length / 256));
      await stores.close();
    }
  });

  it('catches up from the ledger when given rows past a gap, leaving live rows to the catch-up meanwhile', async () => {
    const { stores } = open();
    const rows = ledger(3_000);
    await commit(stores, 'acme', rows.slice(0, 2_000));
    const trees = new MerkleTrees(stores.merkle, stores.ledger, silentLogger());
    trees.onCommitted('acme', rows.slice(0, 100));
    trees.onCommitted('acme', rows.slice(1_000, 2_000)); // rows 101..1000 were never given
    // The catch-up has read its first chunk and waits for its stripes' write: it is under way.
    expect(trees.catchingUp('acme')).toBe(true);
    expect(trees.size('acme')).toBeLessThan(2_000);
    await commit(stores, 'acme', rows.slice(2_000));
    trees.onCommitted('acme', rows.slice(2_000)); // while it catches up: left to the catch-up, which reads them
    await trees.catchUpAll();
    expect(trees.catchingUp('acme')).toBe(false);
    expect(trees.size('acme')).toBe(3_000);
    expect(rootAt(trees.tree('acme')).equals(rootAt(reference(rows)))).toBe(true);
    await trees.settled();
    await stores.close();
  });

  it('keeps stripes whose write failed readable until a later write stores them', async () => {
    const { stores } = open();
    const lmdb = stores.merkle;
    let failing = true;
    const store = over(lmdb, { put: (stripes) => (failing ? Promise.reject(new Error('disk full')) : lmdb.put(stripes)) });
    const lines: LogLine[] = [];
    const rows = ledger(1_000);
    await commit(stores, 'acme', rows);
    const trees = new MerkleTrees(store, stores.ledger, captureLogger(lines));
    trees.onCommitted('acme', rows.slice(0, 600));
    await trees.settled();
    expect(lines.map((l) => l.msg)).toContain('storing Merkle tree stripes failed; they stay in memory and are tried again with the next');
    expect(lmdb.storedStripes('acme')).toBe(0);
    expect(rootAt(trees.tree('acme')).equals(rootAt(reference(rows.slice(0, 600))))).toBe(true);
    // Proofs (the route's body too) read the two full leaf stripes from the unstored ones.
    const before = reference(rows.slice(0, 600));
    for (const m of [0, 1, 255, 256, 511, 512, 599]) {
      expect(inclusionProof(trees.tree('acme'), m, 600)).toEqual(inclusionProof(before, m, 600));
      const body = JSON.parse(inclusionBody(trees.tree('acme'), m + 1, 600, null).toString('utf8')) as { hashes: string[] };
      expect(body.hashes, `leaf ${m}`).toEqual(inclusionProof(before, m, 600).map((h) => h.toString('hex')));
    }
    failing = false;
    trees.onCommitted('acme', rows.slice(600));
    await trees.settled();
    expect(lmdb.storedStripes('acme')).toBe(3);
    expect(rootAt(trees.tree('acme')).equals(rootAt(reference(rows)))).toBe(true);
    await stores.close();
  });
});

describe('MerkleTrees.holds', () => {
  it('says whether the tree holds the rows through a seq, and catches up from the ledger rows it was never fed', async () => {
    const { stores } = open();
    try {
      const rows = ledger(1_000);
      // Rows pulled into the ledger without the tree being fed (a node that does not own the org).
      await commit(stores, 'acme', rows);
      const trees = new MerkleTrees(stores.merkle, stores.ledger, silentLogger());
      expect(trees.holds('acme', 0)).toBe(true);
      expect(trees.holds('acme', 1_000)).toBe(false);
      const end = Date.now() + 10_000;
      while (!trees.holds('acme', 1_000)) {
        if (Date.now() > end) throw new Error('the tree did not catch up with its ledger');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(rootAt(trees.tree('acme')).equals(rootAt(reference(rows)))).toBe(true);
      expect(trees.holds('acme', 1_001)).toBe(false);
      await trees.settled();
    } finally {
      await stores.close();
    }
  });
});
