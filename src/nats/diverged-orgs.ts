import type { Database } from 'lmdb';
import { ensureError } from '../errors.js';
import type { Logger } from '../log.js';

/** Keys `diverged.<org>` of the replica's meta table. */
const PREFIX = 'diverged.';

/**
 * Orgs whose rows on this node are not the ledger stream's (a consumer on a server cut off from
 * its cluster handed over messages the cluster then dropped or replaced): rows are never
 * overwritten, so such an org is not read from this node's copy again. Kept in the replica's meta
 * table, so a restart knows them; only a rebuilt data dir clears them.
 */
export class DivergedOrgs {
  private readonly at = new Map<string, number>();

  constructor(
    private readonly meta: Database<number, string>,
    private readonly log: Logger,
  ) {
    for (const { key, value } of meta.getRange({ start: PREFIX, end: `${PREFIX}\uffff` })) this.at.set(key.slice(PREFIX.length), value);
  }

  /** The seq at or before which the org's copy here differs from the stream, if it does. */
  get(org: string): number | undefined {
    return this.at.get(org);
  }

  has(org: string): boolean {
    return this.at.has(org);
  }

  mark(org: string, seq: number, why: string): void {
    this.at.set(org, seq);
    this.meta.put(`${PREFIX}${org}`, seq).catch((error: unknown) => this.log.error({ org, err: ensureError(error) }, 'ledger replica: the mark of a diverged org could not be saved'));
    this.log.error({ org, seq, why }, 'ledger replica: this node\'s copy of the org differs from the stream; its reads are refused here until the data dir is rebuilt (writes go on from the stream)');
  }
}
