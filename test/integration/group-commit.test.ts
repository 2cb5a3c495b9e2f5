import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import { GENESIS_HASH, makeRow, type LedgerRow } from '../../src/domain/ledger.js';
import { openLmdb, type LmdbStores } from '../../src/store/lmdb.js';

/**
 * DESIGN §6: one durable write per batch across orgs. Commits of many orgs made together (as the
 * org writers make them under load) share write transactions and fsyncs: LMDB's write thread
 * takes the first at once and folds every commit queued meanwhile into the next transaction, so a
 * burst of 200 orgs' commits costs a handful of transactions, not 200. LMDB's own transaction
 * counter says so. (Holding the turn's commits for one transaction was tried: 4 → 1 here, but
 * 200-org HTTP ingest fell from 0.72× to 0.58× of one org, the write thread idle while it waited.)
 */
describe('group commit across orgs (real LMDB, sync durability)', () => {
  let dir = '';
  let stores: LmdbStores | null = null;
  afterEach(async () => {
    await stores?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the commits of 200 orgs made in one turn share write transactions (at least four commits to one, on average), and every row is there after', async () => {
    dir = mkdtempSync(join(tmpdir(), 'vigil-group-commit-'));
    stores = openLmdb(dir, 'sync');
    let root: RootDatabase | null = null;
    stores.env.attach((r) => (root = r));
    const txn = (): number => (root!.getStats() as { lastTxnId: number }).lastTxnId;
    const rowsOf = (org: number, count = 1): LedgerRow[] => {
      const rows: LedgerRow[] = [];
      for (let seq = 1; seq <= count; seq++) rows.push(makeRow(rows.at(-1)?.chainHash ?? GENESIS_HASH, seq, 'event', '2026-11-24T00:00:00.000Z', 'a1', { org, seq }));
      return rows;
    };
    // Warm: the first commit opens the tables.
    expect(await stores.ledger.commit('warm', rowsOf(-1), 0)).toBe(true);
    const before = txn();
    const commits = Array.from({ length: 200 }, (_, org) => stores!.ledger.commit(`org-${org}`, rowsOf(org), 0));
    expect(await Promise.all(commits)).toEqual(Array.from({ length: 200 }, () => true));
    // 4–18 measured here (how many queue while one commits depends on timing); one each would be 200.
    const transactions = txn() - before;
    expect(transactions).toBeGreaterThanOrEqual(1);
    expect(transactions).toBeLessThanOrEqual(50);
    for (let org = 0; org < 200; org++) expect(stores.ledger.last(`org-${org}`)?.seq).toBe(1);
  });
});
