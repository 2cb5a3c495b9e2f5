import { statfsSync } from 'node:fs';
import { VigilError } from '../errors.js';

/** How long a reading of the free space is trusted. */
const RECHECK_MS = 50;

/**
 * Refuses writes while the disk holding the data dir has less than `minBytes` free (as
 * Elasticsearch's flood-stage watermark does), so that LMDB itself is never the one to find the
 * disk full. lmdb-js 3.5.6 mishandles that: on a failed page write, mdb_page_flush formats its error
 * with sprintf into malloc(100), and a long enough text overflows the heap and aborts the process.
 * The free space is read with statfs at most every RECHECK_MS: the floor must hold more than that
 * long a burst of writes.
 */
export class FreeSpaceFloor {
  private readAt = -Infinity;
  private free = Infinity;

  constructor(
    private readonly dir: string,
    readonly minBytes: number,
    private readonly freeBytes: (dir: string) => number = statfsFree,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Throws `unavailable` (503, retry) while the disk is below the floor. */
  check(): void {
    if (this.minBytes <= 0) return;
    const now = this.now();
    if (now - this.readAt >= RECHECK_MS) {
      this.free = this.freeBytes(this.dir);
      this.readAt = now;
    }
    if (this.free < this.minBytes) {
      throw new VigilError('unavailable', `the disk holding the data dir has less than ${formatMb(this.minBytes)} MB free (VIGIL_MIN_FREE_MB); nothing was recorded, retry`, undefined, { retryAfterSeconds: 1 });
    }
  }
}

function statfsFree(dir: string): number {
  const stats = statfsSync(dir);
  return stats.bavail * stats.bsize;
}

const formatMb = (bytes: number): string => String(Math.round((bytes / 1024 / 1024) * 100) / 100);
