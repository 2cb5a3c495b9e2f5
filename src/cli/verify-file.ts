import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { ChainVerifier, rowFromExport, type ExportedRecord, type VerifyReport } from '../domain/ledger.js';

/** How far a verification has read: records, and bytes of the file's `total`. */
export interface FileProgress {
  records: number;
  bytesRead: number;
  total: number;
}

/**
 * Verifies an exported ledger (JSON Lines) with the same chain code the server uses. `progress`
 * is told after each record (cheap: a caller throttles what it prints).
 */
export async function verifyLedgerFile(path: string, progress?: (at: FileProgress) => void): Promise<VerifyReport> {
  const verifier = new ChainVerifier();
  const { size: total } = await stat(path);
  const input = createReadStream(path, 'utf8');
  const lines = createInterface({ input, crlfDelay: Infinity });
  let records = 0;
  for await (const line of lines) {
    if (line.trim() === '') continue;
    try {
      const record = JSON.parse(line) as ExportedRecord & { error?: { code?: unknown; message?: unknown } };
      // An export that met a damaged row ends with an error line instead of the rest of the ledger.
      if (record.error !== undefined) verifier.fail(`the export ended with an error: ${String(record.error?.code)}: ${String(record.error?.message)}`);
      else verifier.push(rowFromExport(record));
    } catch (error) {
      verifier.fail(`unreadable record: ${(error as Error).message}`);
    }
    progress?.({ records: ++records, bytesRead: input.bytesRead, total });
  }
  return verifier.report();
}
