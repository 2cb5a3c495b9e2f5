import type { HttpRequest } from 'uWebSockets.js';
import type { Counter, Histogram } from 'prom-client';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { Exchange } from './exchange.js';

/**
 * What is recorded of each answered request of one route (DESIGN §11): its count and latency by
 * status in GET /metrics, and one access line at `debug`. A route gets none when neither is on, so
 * the hot path then pays one null test.
 */
export class RouteObserver {
  /** prom-client's children for each status seen: label lookups once per status, not per request. */
  private readonly byStatus = new Map<number, { count: Counter.Internal; seconds: Histogram.Internal<'method' | 'route' | 'status'> }>();

  private constructor(
    private readonly metrics: Metrics | null,
    private readonly log: Logger | null,
    readonly method: string,
    readonly route: string,
  ) {}

  /** The observer of a route (`method` as HTTP names it), or null when nothing is recorded. */
  static of(metrics: Metrics | null, log: Logger, method: string, route: string): RouteObserver | null {
    const debug = log.isLevelEnabled('debug') ? log : null;
    return metrics === null && debug === null ? null : new RouteObserver(metrics, debug, method, route);
  }

  /** Starts timing a request (while `req` is valid): its exchange carries this observer until the answer is written. */
  begin(exchange: Exchange, req: HttpRequest): void {
    exchange.observer = this;
    exchange.started = performance.now();
    if (this.log === null) return;
    const query = req.getQuery();
    exchange.url = query === undefined || query === '' ? req.getUrl() : `${req.getUrl()}?${query}`;
  }

  /** The answer is written (or the client left: status 499). */
  answered(exchange: Exchange, status: number): void {
    exchange.observer = undefined;
    const seconds = (performance.now() - exchange.started!) / 1000;
    if (this.metrics !== null) {
      let series = this.byStatus.get(status);
      if (series === undefined) {
        const labels = [this.method, this.route, String(status)] as const;
        series = { count: this.metrics.requests.labels(...labels), seconds: this.metrics.requestSeconds.labels(...labels) };
        this.byStatus.set(status, series);
      }
      series.count.inc();
      series.seconds.observe(seconds);
    }
    this.log?.debug(
      { method: this.method, route: this.route, url: exchange.url, status, ms: Math.round(seconds * 1e4) / 10, ...(exchange.keyId === undefined ? {} : { key_id: exchange.keyId }) },
      'request',
    );
  }
}
