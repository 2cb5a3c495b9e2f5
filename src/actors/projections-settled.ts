import { VigilError } from '../errors.js';
import type { LedgerReader } from '../store/ledger-reader.js';
import type { AgentDirectory } from './agent-directory.js';

/** How often a wait looks again: projections take a batch within a turn of its rows landing. */
const POLL_MS = 10;
/** How long a wait lasts before 503. */
export const SETTLE_WAIT_MS = 2000;

/**
 * A wait until this node's projections of an org have taken the rows its ledger holds as the wait
 * begins: at once when they have, else looked at again every POLL_MS up to `waitMs`, then 503
 * `unavailable`. The four projections (directory, reviews, meter, export log) take each batch
 * together, in one synchronous pass (startConsumers), so the directory's length stands for all.
 * A node that does not feed an org's projections at all answers 503, never a stale answer.
 */
export function projectionsSettled(ledger: LedgerReader, directory: Pick<AgentDirectory, 'org'>, waitMs = SETTLE_WAIT_MS): (org: string) => Promise<void> {
  return async (org) => {
    const target = ledger.last(org)?.seq ?? 0;
    const end = performance.now() + waitMs;
    while ((directory.org(org)?.length ?? 0) < target) {
      if (performance.now() > end) throw new VigilError('unavailable', `this node's view of org ${org} has not taken its ledger's rows yet; ask again in a moment`, undefined, { retryAfterSeconds: 1 });
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  };
}
