import type { RootDatabase } from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import { WriterShare } from '../../src/actors/writer-share.js';
import type { OrgReply } from '../../src/bus/messages.js';
import { ChainVerifier, GENESIS_HASH, makeRow, type LedgerRow } from '../../src/domain/ledger.js';
import { openLmdb, type LmdbStores } from '../../src/store/lmdb.js';
import { embedded, type Embedded } from '../support/embedded.js';
import { removeDir, tempDir } from '../support/server.js';

/**
 * DESIGN §6, one durable write per group commit across orgs: the batches every org's writer
 * launches in one event-loop turn are written together (WriterShare with the log's `together`),
 * one LMDB transaction for all of them, each still fenced alone. LMDB's own transaction counter
 * says how many. Written one by one, LMDB's write thread starts on the first few while this thread
 * goes on launching, and the turn's batches land in several transactions (and as many fsyncs).
 */
const ORGS = 100;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** LMDB's last transaction id in `stores`' environment. */
function transactions(stores: LmdbStores): () => number {
  let root: RootDatabase | null = null;
  stores.env.attach((r) => (root = r));
  return () => (root!.getStats() as { lastTxnId: number }).lastTxnId;
}

describe('one transaction for the batches of every org in a turn (real LMDB, sync durability)', () => {
  it(`the commands of ${ORGS} orgs sent in one turn are appended in one transaction, every org's chain whole`, async () => {
    const dir = tempDir('vigil-turn-commit-');
    // The share writes through the log the writers append to (as runtime.ts wires it).
    const options: { share?: WriterShare; maxPending: number } = { maxPending: 1000 };
    const path: Embedded = embedded(dir, options, (log) => {
      options.share = new WriterShare((run) => log.together!(run));
      return log;
    });
    cleanups.push(async () => {
      await path.close();
      removeDir(dir);
    });
    const txn = transactions(path.stores);
    const orgs = Array.from({ length: ORGS }, (_, i) => `org-${i}`);
    const turn = async (command: (org: string) => Parameters<Embedded['commands']['request']>[0]): Promise<number> => {
      const before = txn();
      const replies = (await Promise.all(orgs.map((org) => path.commands.request(command(org))))) as OrgReply[];
      expect(replies.filter((r) => !r.ok)).toEqual([]);
      return txn() - before;
    };
    // The first command of each org starts its writer (reading its empty ledger): a turn later.
    expect(await turn((org) => ({ type: 'agent.register', org, agent: { agent_id: 'a', name: 'A', kind: 'production', observed: true } }))).toBe(1);
    for (let round = 0; round < 3; round++) {
      expect(await turn((org) => ({ type: 'event.ingest', org, event: { agent_id: 'a', event_type: 'output_generated', payload: { round }, dti: null, source: 'self', actor: null } }))).toBe(1);
    }
    for (const org of orgs) {
      const rows = await path.rows(org);
      expect(rows.map((r) => r.seq)).toEqual([1, 2, 3, 4]);
      const verifier = new ChainVerifier();
      for (const row of rows) verifier.push(row);
      expect(verifier.report()).toMatchObject({ ok: true });
    }
  });

  it('commits made together are one transaction; a stale fence among them refuses that org\'s rows alone', async () => {
    const dir = tempDir('vigil-turn-commit-');
    const stores = openLmdb(dir, 'sync');
    cleanups.push(async () => {
      await stores.close();
      removeDir(dir);
    });
    const txn = transactions(stores);
    const rowsOf = (org: number, seq: number): LedgerRow[] => [makeRow(GENESIS_HASH, seq, 'event', '2026-11-28T00:00:00.000Z', 'a1', { org })];
    const before = txn();
    let commits: Promise<boolean>[] = [];
    // Org 15 presents a fence (last seq 4) its empty ledger does not have.
    stores.ledger.together(() => {
      commits = Array.from({ length: 30 }, (_, org) => (org === 15 ? stores.ledger.commit(`org-${org}`, rowsOf(org, 5), 4) : stores.ledger.commit(`org-${org}`, rowsOf(org, 1), 0)));
    });
    expect(await Promise.all(commits)).toEqual(Array.from({ length: 30 }, (_, org) => org !== 15));
    expect(txn() - before).toBe(1);
    for (let org = 0; org < 30; org++) expect(stores.ledger.last(`org-${org}`)?.seq).toBe(org === 15 ? undefined : 1);
  });
});
