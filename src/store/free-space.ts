import { statfsSync } from 'node:fs';
import { VigilError } from '../errors.js';

/**
 * Refuses writes while the disk holding the data dir has less than `minBytes` free (as
 * Elasticsearch's flood-stage watermark does), so that LMDB itself is never the one to find the
 * disk full. lmdb-js 3.5.6 mishandles that: on a failed page write, mdb_page_flush formats its error
 * with sprintf into malloc(100), and a long enough text overflows the heap and aborts the process.
 * The free space is read with statfs once per event-loop turn that writes (under a microsecond):
 * a disk filled by another process between two requests is seen by the second. A reading trusted
 * for 50 ms was not: a disk filled right after a write let the next one through to LMDB. Not at
 * every check either: the commits of many orgs started in one turn must reach LMDB's write queue
 * together, to share its transactions (group commit), not spaced by a syscall each.
 */
export class FreeSpaceFloor {
  /** This turn's reading, or null (cleared at the turn's end). */
  private free: number | null = null;

  constructor(
    private readonly dir: string,
    readonly minBytes: number,
    private readonly freeBytes: (dir: string) => number = statfsFree,
  ) {}

  /** Throws `unavailable` (503, retry) while the disk is below the floor. */
  check(): void {
    if (this.minBytes <= 0) return;
    if (this.free === null) {
      this.free = this.freeBytes(this.dir);
      setImmediate(() => (this.free = null));
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
