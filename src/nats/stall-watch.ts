import type { JetStreamManager } from '@nats-io/jetstream';

/** How long a feed may hand over nothing before it asks the stream whether it holds more. */
export const STALL_MS = 3000;

/** The longest quiet time a feed whose replacements did not help waits before the next (see StallWatch). */
const MAX_STALL_MS = 60_000;

/** The stream a feed follows. */
export interface WatchedStream {
  /** Asks the stream's last sequence, from the stream's leader. */
  jsm: JetStreamManager;
  stream: string;
  /** How long a silent feed waits before it asks (tests; default STALL_MS). */
  stallMs?: number;
}

/** The feed watched. */
export interface WatchedFeed {
  /** The last sequence the feed handed over. */
  delivered(): number;
  /** Whether the feed has a consumer now (not while it is making one). */
  active(): boolean;
  /** Replaces the consumer. */
  renew(why: string): void;
}

/**
 * Watches a stream feed (StreamFeed, KvFeed) for a consumer gone silent with nothing reported: made
 * while a nats-server of the cluster restarts, an ordered consumer was seen to answer heartbeats
 * and deliver nothing (in the cluster fault tests: a node's ledger replica then trailed the stream
 * for good, and its org's writes were refused with 503 until the test gave up).
 *
 * A feed that has handed over nothing for `stallMs` asks the stream for its last sequence; if the
 * stream holds messages past the last handed over, and still does one check later (a message
 * published just then is not a stall), the consumer is replaced. An idle stream is asked again
 * after another quiet `stallMs`. Each replacement that hands over nothing doubles the quiet time
 * before the next (up to a minute), so a stream whose last messages cannot be delivered (aged out
 * or purged by an operator) costs a warning a minute, not a consumer every few seconds.
 */
export class StallWatch {
  /** When the feed last handed over a message, made a consumer, or asked the stream (ms, monotonic). */
  private quietSince = performance.now();
  /** The quiet time that makes the feed ask: stallMs, doubled by each replacement that did not help. */
  private quietMs: number;
  /** The stream was found ahead at the last check: one more check, and the consumer is replaced. */
  private suspect = false;
  private asking = false;
  private readonly timer: NodeJS.Timeout;
  private readonly stallMs: number;

  constructor(
    private readonly stream: WatchedStream,
    private readonly feed: WatchedFeed,
  ) {
    this.stallMs = stream.stallMs ?? STALL_MS;
    this.quietMs = this.stallMs;
    this.timer = setInterval(() => void this.check(), this.stallMs / 3);
    this.timer.unref();
  }

  /** A message handed over. */
  delivered(): void {
    this.quietSince = performance.now();
    this.quietMs = this.stallMs;
    this.suspect = false;
  }

  /** A consumer made. */
  started(): void {
    this.quietSince = performance.now();
    this.suspect = false;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async check(): Promise<void> {
    if (this.asking || !this.feed.active() || performance.now() - this.quietSince < (this.suspect ? this.stallMs / 3 : this.quietMs)) return;
    const since = this.quietSince;
    this.asking = true;
    try {
      const last = (await this.stream.jsm.streams.info(this.stream.stream)).state.last_seq;
      if (this.quietSince !== since || !this.feed.active()) return; // a message, or a new consumer, meanwhile
      if (last <= this.feed.delivered()) {
        this.suspect = false;
        this.quietSince = performance.now(); // idle: asked again after another quiet spell
      } else if (!this.suspect) {
        this.suspect = true;
        this.quietSince = performance.now();
      } else {
        const quiet = Math.round((performance.now() - since + this.quietMs) / 1000);
        this.quietMs = Math.min(this.quietMs * 2, MAX_STALL_MS);
        this.feed.renew(`stalled: the stream holds up to ${last}, nothing handed over past ${this.feed.delivered()} for ${quiet} s`);
      }
    } catch {
      // The stream did not answer (a server restarting): the consumer's own reports cover that.
    } finally {
      this.asking = false;
    }
  }
}
