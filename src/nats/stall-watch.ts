/** How long a feed may hand over nothing before it asks the stream whether it holds more. */
export const STALL_MS = 3000;

export interface StallWatchArgs {
  /** The stream's last sequence, from the stream's leader (a request). */
  lastSeq(): Promise<number>;
  /** The last sequence the feed handed over. */
  delivered(): number;
  /** Whether the feed has a consumer now (not while it is making one). */
  active(): boolean;
  /** Replaces the consumer. */
  renew(why: string): void;
  /** How long a silent feed waits before it asks (tests; default STALL_MS). */
  stallMs?: number;
}

/**
 * Watches a stream feed (StreamFeed, KvFeed) for a consumer gone silent with nothing reported: made
 * while a nats-server of the cluster restarts, an ordered consumer was seen to answer heartbeats
 * and deliver nothing (in the cluster fault tests: a node's ledger replica then trailed the stream
 * for good, and its org's writes were refused with 503 until the test gave up). A feed that has
 * handed over nothing for `stallMs` asks the stream for its last sequence, and has its consumer
 * replaced if the stream holds messages it has not handed over; an idle stream is asked again only
 * after another quiet `stallMs`.
 */
export class StallWatch {
  /** When the feed last showed progress (a message handed over, a consumer made) or the stream was asked. */
  private progressAt = performance.now();
  private asking = false;
  private readonly timer: NodeJS.Timeout;
  private readonly stallMs: number;

  constructor(private readonly args: StallWatchArgs) {
    this.stallMs = args.stallMs ?? STALL_MS;
    this.timer = setInterval(() => void this.check(), this.stallMs / 3);
    this.timer.unref();
  }

  /** A message handed over, or a consumer made. */
  progress(): void {
    this.progressAt = performance.now();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async check(): Promise<void> {
    if (this.asking || !this.args.active() || performance.now() - this.progressAt < this.stallMs) return;
    const silentSince = this.progressAt;
    this.asking = true;
    try {
      const last = await this.args.lastSeq();
      if (this.progressAt !== silentSince || !this.args.active()) return; // progress, or a renewal, meanwhile
      if (last > this.args.delivered()) {
        this.args.renew(`stalled: the stream holds up to ${last}, nothing handed over past ${this.args.delivered()} for ${Math.round((performance.now() - silentSince) / 1000)} s`);
      } else {
        this.progressAt = performance.now();
      }
    } catch {
      // The stream did not answer (a server restarting): the consumer's own reports cover that.
    } finally {
      this.asking = false;
    }
  }
}
