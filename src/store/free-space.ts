import { statfsSync } from 'node:fs';
import { VigilError } from '../errors.js';

/**
 * Refuses writes while the disk holding the data dir has less than `minBytes` free (as
 * Elasticsearch's flood-stage watermark does), so that LMDB itself is never the one to find the
 * disk full. lmdb-js 3.5.6 mishandles that: on a failed page write, mdb_page_flush formats its error
 * with sprintf into malloc(100), and a long enough text overflows the heap and aborts the process.
 * The free space is read with statfs at every check (under a microsecond; a check is a commit, not an
 * event): a disk filled by another process between two writes is seen by the second. A reading
 * trusted for 50 ms was not: a disk filled right after a write let the next one through to LMDB.
 */
export class FreeSpaceFloor {
  constructor(
    private readonly dir: string,
    readonly minBytes: number,
    private readonly freeBytes: (dir: string) => number = statfsFree,
  ) {}

  /** Throws `unavailable` (503, retry) while the disk is below the floor. */
  check(): void {
    if (this.minBytes <= 0) return;
    if (this.freeBytes(this.dir) < this.minBytes) {
      throw new VigilError('unavailable', `the disk holding the data dir has less than ${formatMb(this.minBytes)} MB free (VIGIL_MIN_FREE_MB); nothing was recorded, retry`, undefined, { retryAfterSeconds: 1 });
    }
  }
}

function statfsFree(dir: string): number {
  const stats = statfsSync(dir);
  return stats.bavail * stats.bsize;
}

const formatMb = (bytes: number): string => String(Math.round((bytes / 1024 / 1024) * 100) / 100);
