import { lmdbLogHarness } from '../support/lmdb-log-harness.js';
import { opaqueLog } from '../support/opaque-log.js';
import { runLedgerLogContract } from './ledger-log.case.js';

// The contract with no capabilities and fences that are not seqs, as a remote log has them: the
// capability-gated cases show as skipped here, and every other case must hold without them.
runLedgerLogContract('LmdbLedgerLog seen as a remote log (opaque fences, no capabilities)', [], () => lmdbLogHarness(opaqueLog));
