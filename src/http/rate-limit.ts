/**
 * Fixed-window counters per client, with bounded memory: at most `maxClients` windows are kept;
 * when full, the oldest windows are dropped first (a dropped client starts a fresh window).
 */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

export class RateLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();

  constructor(
    /** What one client may take in a window. */
    readonly limit: number,
    private readonly windowMs: number,
    private readonly maxClients = 100_000,
  ) {}

  /**
   * Takes `cost` (a request: 1; events: how many) from the client's window. A refusal takes
   * nothing, so a smaller take may still fit in what is left of the window; for a cost of 1 that
   * is the same as counting it (the window is full either way).
   */
  take(client: string, now: number, cost = 1): RateDecision {
    let window = this.windows.get(client);
    if (window === undefined || now - window.start >= this.windowMs) {
      if (window !== undefined) this.windows.delete(client);
      else if (this.windows.size >= this.maxClients) this.evict();
      window = { start: now, count: 0 };
      this.windows.set(client, window);
    }
    const allowed = window.count + cost <= this.limit;
    if (allowed) window.count += cost;
    const resetSeconds = Math.max(1, Math.ceil((window.start + this.windowMs - now) / 1000));
    return { allowed, limit: this.limit, remaining: Math.max(0, this.limit - window.count), resetSeconds };
  }

  get size(): number {
    return this.windows.size;
  }

  private evict(): void {
    let drop = Math.max(1, Math.floor(this.maxClients / 10));
    for (const key of this.windows.keys()) {
      this.windows.delete(key);
      if (--drop === 0) return;
    }
  }
}
