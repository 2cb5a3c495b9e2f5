import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { ChainVerifier, rowFromExport, type ExportedRecord, type VerifyReport } from '../domain/ledger.js';

/** Verifies an exported ledger (JSON Lines) with the same chain code the server uses. */
export async function verifyLedgerFile(path: string): Promise<VerifyReport> {
  const verifier = new ChainVerifier();
  const lines = createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === '') continue;
    let record: ExportedRecord;
    try {
      record = JSON.parse(line) as ExportedRecord;
      verifier.push(rowFromExport(record));
    } catch (error) {
      verifier.fail(`unreadable record: ${(error as Error).message}`);
    }
  }
  return verifier.report();
}
