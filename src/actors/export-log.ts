import type { ProjectionHandler } from './projection.js';
import { parseRecord } from '../domain/records.js';

/** A past bundle as GET /exports shows it (spec 2.6), plus the agents filter it had. */
export interface ExportEntry {
  seq: number;
  recorded_at: string;
  manifest_sha256: string;
  since_seq: number;
  until_seq: number;
  files: string[];
  chain_hash: string;
  agents: string[] | null;
}

export interface ExportLogSnapshot {
  head: string | null;
  length: number;
  exports: ExportEntry[];
}

/** Projection of every org's `export` ledger records, oldest first. */
export class ExportLog {
  private readonly orgs = new Map<string, ExportLogSnapshot>();

  readonly onCommitted: ProjectionHandler = (org, rows) => {
    const log = this.logOf(org);
    for (const row of rows) {
      log.length = row.seq;
      const record = parseRecord(row);
      if (record?.kind !== 'export') continue;
      const body = record.body;
      log.exports.push({
        seq: row.seq,
        recorded_at: record.recordedAt,
        manifest_sha256: body.manifest_sha256,
        since_seq: body.since_seq,
        until_seq: body.until_seq,
        files: [...body.files],
        chain_hash: row.chainHash.toString('hex'),
        agents: body.agents === null ? null : [...body.agents],
      });
    }
    const last = rows[rows.length - 1];
    if (last !== undefined) log.head = last.chainHash.toString('hex');
  };

  /** Newest first. */
  list(org: string, limit: number): ExportEntry[] {
    return (this.orgs.get(org)?.exports ?? []).slice(-limit).reverse();
  }

  snapshot(org: string): ExportLogSnapshot | undefined {
    const log = this.orgs.get(org);
    return log === undefined ? undefined : { head: log.head, length: log.length, exports: [...log.exports] };
  }

  restore(org: string, snapshot: ExportLogSnapshot): void {
    this.orgs.set(org, { head: snapshot.head, length: snapshot.length, exports: [...snapshot.exports] });
  }

  orgNames(): string[] {
    return [...this.orgs.keys()];
  }

  private logOf(org: string): ExportLogSnapshot {
    let log = this.orgs.get(org);
    if (log === undefined) {
      log = { head: null, length: 0, exports: [] };
      this.orgs.set(org, log);
    }
    return log;
  }
}

/** Joins logs rebuilt from disjoint sets of rows (a partitioned replay), oldest first. */
export function mergeExportLogs(parts: readonly ExportLogSnapshot[], head: string | null, length: number): ExportLogSnapshot {
  return { head, length, exports: parts.flatMap((p) => p.exports).sort((a, b) => a.seq - b.seq) };
}
