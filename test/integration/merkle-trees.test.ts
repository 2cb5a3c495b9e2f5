import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MerkleTrees } from '../../src/actors/merkle-trees.js';
import { GENESIS_HASH, leafInput, makeRow, type LedgerRow } from '../../src/domain/ledger.js';
import { consistencyProof, inclusionProof, leafHash, MemoryTree, rootAt } from '../../src/domain/merkle.js';
import { LmdbEnv } from '../../src/store/lmdb-env.js';
import { LmdbMerkleStore } from '../../src/store/lmdb-merkle-store.js';
import type { MerkleStore } from '../../src/store/merkle-store.js';
import { captureLogger, silentLogger, type LogLine } from '../support/logs.js';

/** Org trees over real LMDB files (DESIGN §10): stored as stripes off the request path, resumed after a restart. */
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

describe('Merkle trees of orgs, stored in LMDB', () => {
  it('keeps each org\'s tree as its rows commit, and resumes it from the stored stripes after a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vigil-merkle-'));
    dirs.push(dir);
    const [acme, beta] = [ledger(20_000), ledger(700, 'b')];
    let env = new LmdbEnv(dir, 'sync');
    let trees = new MerkleTrees(new LmdbMerkleStore(env), silentLogger());
    for (let i = 0; i < 15_000; i += 250) trees.onCommitted('acme', acme.slice(i, i + 250));
    trees.onCommitted('beta', beta);
    trees.onCommitted('acme', acme.slice(0, 10)); // rows it holds already: skipped
    await trees.settled();
    expect(rootAt(trees.tree('acme')).equals(rootAt(reference(acme.slice(0, 15_000))))).toBe(true);
    await env.close();

    env = new LmdbEnv(dir, 'sync');
    trees = new MerkleTrees(new LmdbMerkleStore(env), silentLogger());
    // Stored: whole stripes of 256 leaves; the start-up replay gives it the rows after them.
    expect(trees.size('acme')).toBe(Math.floor(15_000 / 256) * 256);
    expect(trees.size('beta')).toBe(512);
    expect(trees.size('nobody')).toBe(0);
    trees.onCommitted('acme', acme.slice(trees.size('acme')));
    trees.onCommitted('beta', beta.slice(512));
    await trees.settled();
    const full = reference(acme);
    const tree = trees.tree('acme');
    expect(rootAt(tree).equals(rootAt(full))).toBe(true);
    expect(rootAt(trees.tree('beta')).equals(rootAt(reference(beta)))).toBe(true);
    for (const m of [0, 255, 256, 12_345, 19_999]) expect(inclusionProof(tree, m)).toEqual(inclusionProof(full, m));
    expect(consistencyProof(tree, 15_000)).toEqual(consistencyProof(full, 15_000));
    await env.close();
  });

  it('refuses a row that skips seqs (a broken feed), and keeps stripes whose write failed readable until a later write stores them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vigil-merkle-'));
    dirs.push(dir);
    const env = new LmdbEnv(dir, 'sync');
    const lmdb = new LmdbMerkleStore(env);
    let failing = true;
    const store: MerkleStore = {
      stripe: (org, level, index) => lmdb.stripe(org, level, index),
      storedStripes: (org) => lmdb.storedStripes(org),
      put: (stripes) => (failing ? Promise.reject(new Error('disk full')) : lmdb.put(stripes)),
    };
    const lines: LogLine[] = [];
    const trees = new MerkleTrees(store, captureLogger(lines));
    const rows = ledger(1_000);
    expect(() => trees.onCommitted('acme', [rows[1]!])).toThrow(/holds 0 leaves and was given seq 2/);
    trees.onCommitted('acme', rows.slice(0, 600));
    await trees.settled();
    expect(lines.map((l) => l.msg)).toContain('storing Merkle tree stripes failed; they stay in memory and are tried again with the next');
    expect(lmdb.storedStripes('acme')).toBe(0);
    expect(rootAt(trees.tree('acme')).equals(rootAt(reference(rows.slice(0, 600))))).toBe(true);
    failing = false;
    trees.onCommitted('acme', rows.slice(600));
    await trees.settled();
    expect(lmdb.storedStripes('acme')).toBe(3);
    expect(rootAt(trees.tree('acme')).equals(rootAt(reference(rows)))).toBe(true);
    await env.close();
  });
});
