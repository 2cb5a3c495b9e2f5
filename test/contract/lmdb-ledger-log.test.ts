import { lmdbLogHarness } from '../support/lmdb-log-harness.js';
import { runLedgerLogContract } from './ledger-log.case.js';

runLedgerLogContract('LmdbLedgerLog', ['pipelined-appends', 'local-delivery'], () => lmdbLogHarness());
