import type { ProjectionHandler } from '../bus/bus.js';
import { rowBody } from '../domain/ledger.js';

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
      if (row.kind !== 'export') continue;
      const body = rowBody(row);
      log.exports.push({
        seq: row.seq,
        recorded_at: row.recordedAt,
        manifest_sha256: String(body.manifest_sha256),
        since_seq: Number(body.since_seq),
        until_seq: Number(body.until_seq),
        files: Array.isArray(body.files) ? body.files.map(String) : [],
        chain_hash: row.chainHash.toString('hex'),
        agents: Array.isArray(body.agents) ? body.agents.map(String) : null,
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
