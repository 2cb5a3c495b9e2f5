import type { Policy } from '../domain/policy.js';
import type { DirectorySnapshot } from './agent-directory.js';
import type { ExportLogSnapshot } from './export-log.js';
import type { WriterSnapshot } from './org-recovery.js';
import type { ReviewQueueSnapshot } from './review-queue.js';
import type { MeterSnapshot } from './usage-meter.js';

/** What a replay rebuilds for one org: the writer's state and each projection's. */
export interface OrgRebuild {
  writer: WriterSnapshot;
  directory: DirectorySnapshot;
  reviews: ReviewQueueSnapshot;
  meter: MeterSnapshot;
  exports: ExportLogSnapshot;
}

/** One org to replay: its rows 1..to. */
export interface ReplayJob {
  org: string;
  to: number;
}

/**
 * A rebuild of whole orgs faster than the one replay of the log (embedded: cut by agent across
 * threads, store/partitioned-replay.ts). It must build exactly what that replay builds; a failure
 * only costs time (the caller falls back to the replay).
 */
export interface BulkReplay {
  /** Orgs with fewer rows are left to the one replay (below it, the shortcut costs more than it saves). */
  readonly from: number;
  replay(jobs: ReplayJob[], policy: Policy): Promise<Map<string, OrgRebuild>>;
}
