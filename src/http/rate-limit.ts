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
  /** Each client's window: from `start`, `spanMs` long (windowMs, or a multiple of it after a take larger than the limit). */
  private readonly windows = new Map<string, { start: number; spanMs: number; count: number }>();

  constructor(
    /** What one client may take in a window. */
    readonly limit: number,
    private readonly windowMs: number,
    private readonly maxClients = 100_000,
  ) {}

  /**
   * Takes `cost` (a request: 1; a batch's events: how many) from the client's window, all or
   * nothing: a refusal takes nothing, so a smaller take may still fit in what is left (for a cost
   * of 1 the same as counting it: the window is full either way). A take larger than the limit,
   * which no window could hold, is allowed in an empty window and then holds it for as many
   * windows as it fills (ceil(cost / limit)): over time the client still gets `limit` a window.
   */
  take(client: string, now: number, cost = 1): RateDecision {
    let window = this.windows.get(client);
    if (window === undefined || now - window.start >= window.spanMs) {
      if (window !== undefined) this.windows.delete(client);
      else if (this.windows.size >= this.maxClients) this.evict();
      window = { start: now, spanMs: this.windowMs, count: 0 };
      this.windows.set(client, window);
    }
    const allowed = window.count + cost <= this.limit || window.count === 0;
    if (allowed) {
      window.count += cost;
      if (window.count > this.limit) window.spanMs = this.windowMs * Math.ceil(window.count / this.limit);
    }
    const resetSeconds = Math.max(1, Math.ceil((window.start + window.spanMs - now) / 1000));
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
