import { ownerHandler } from '../../src/actors/owner-handler.js';
import { OrgActors } from '../../src/actors/org-actors.js';
import type { OrgActorOptions } from '../../src/actors/org-ledger-actor.js';
import type { LedgerLog } from '../../src/bus/ledger-log.js';
import { LocalCommandRouter } from '../../src/bus/local-router.js';
import { POLICY_V1, policyDigest } from '../../src/domain/policy.js';
import type { LedgerRow } from '../../src/domain/ledger.js';
import { openLmdb, type LmdbStores } from '../../src/store/lmdb.js';
import { LmdbLedgerLog } from '../../src/store/lmdb-ledger-log.js';
import { silentLogger } from './logs.js';

/** The embedded write path as runtime.ts wires it: LMDB, its ledger log, the local router, the org writers. */
export interface Embedded {
  stores: LmdbStores;
  ledger: LedgerLog;
  commands: LocalCommandRouter;
  actors: OrgActors;
  /** Every row of `org`, in order, read through the ledger log. */
  rows(org: string): Promise<LedgerRow[]>;
  close(): Promise<void>;
}

/**
 * Opens `dir` and starts org writers on it. `wrap` may put a faulty log between the writers and
 * the real one. The writers start empty (no replay): for a fresh dir, or one whose orgs are
 * recovered on their first command.
 */
export function embedded(dir: string, options: Partial<OrgActorOptions> = {}, wrap: (log: LedgerLog) => LedgerLog = (log) => log): Embedded {
  const stores = openLmdb(dir);
  const ledger = wrap(new LmdbLedgerLog(stores.ledger, silentLogger()));
  const commands = new LocalCommandRouter();
  const actors = new OrgActors(ledger, { log: silentLogger(), policy: POLICY_V1, policyDigest: policyDigest(POLICY_V1), now: Date.now, maxPending: 1000, ...options });
  commands.serve(ownerHandler(actors), { owns: () => true });
  return {
    stores,
    ledger,
    commands,
    actors,
    async rows(org) {
      const rows: LedgerRow[] = [];
      for await (const batch of ledger.read(org, 1)) rows.push(...batch.rows);
      return rows;
    },
    async close() {
      await commands.close();
      await ledger.close();
      await stores.close();
    },
  };
}
