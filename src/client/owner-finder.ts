import { partitionOf } from '../nats/partition.js';

/** How long a map request may take before the client gives up on it (and stays where it sends). */
const MAP_TIMEOUT_MS = 5_000;

export interface OwnerFinderOptions {
  /** The configured base URL: the map is read from it, and it is where the client falls back to. */
  url: string;
  key: string;
  /** How often the map is read again (ms). */
  refreshMs: number;
  /** Called when the place to send to changes (never with the one it already is). */
  moved: (url: string) => void;
}

interface MapAnswer {
  org: string;
  partitions: number;
  owners: unknown[];
}

/**
 * Where a client sends its org's traffic (cluster mode; README, Cluster mode: owner-aware clients): the base
 * URL the partition map (`GET /cluster/map` of the configured URL) names as the owner of the
 * key's org, else the configured URL. The map is read at once, every `refreshMs`, and again
 * after a failure. An owner that failed (`failed`) is not chosen again for `refreshMs`, so a dead
 * node still named by the map (its lease not yet expired) does not take every retry: meanwhile
 * the configured URL takes the traffic and forwards it. Any trouble with the map (an older
 * server's 404, a network error, an answer of another shape) leaves the configured URL.
 */
export class OwnerFinder {
  private target: string;
  private readonly avoid = new Map<string, number>();
  private reading: Promise<void> | null = null;
  private readonly timer: NodeJS.Timeout;
  /** Resolved once the first read is done (well or not): the client's first frames wait for it. */
  readonly ready: Promise<void>;

  constructor(private readonly options: OwnerFinderOptions) {
    this.target = options.url;
    this.ready = this.refresh();
    this.timer = setInterval(() => void this.refresh(), options.refreshMs);
    this.timer.unref();
  }

  /** The base URL to send to now. */
  get url(): string {
    return this.target;
  }

  /** Sending to `url` failed: back to the configured URL at once, and the map read again. */
  failed(url: string): void {
    if (url === this.options.url) return;
    this.avoid.set(url, Date.now() + this.options.refreshMs);
    this.move(this.options.url);
    void this.refresh();
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** Reads the map (one read at a time) and moves to the owner it names, or to the configured URL. */
  refresh(): Promise<void> {
    this.reading ??= this.read()
      .then((owner) => this.move(owner ?? this.options.url))
      .finally(() => (this.reading = null));
    return this.reading;
  }

  private async read(): Promise<string | null> {
    try {
      const res = await fetch(`${this.options.url}/cluster/map`, { headers: { authorization: `Bearer ${this.options.key}` }, signal: AbortSignal.timeout(MAP_TIMEOUT_MS) });
      if (!res.ok) return null;
      const map = (await res.json()) as Partial<MapAnswer>;
      if (typeof map.org !== 'string' || !Number.isInteger(map.partitions) || !Array.isArray(map.owners) || map.owners.length !== map.partitions) return null;
      const owner = map.owners[partitionOf(map.org, map.partitions)];
      if (typeof owner !== 'string' || !trusted(owner, this.options.url)) return null;
      const url = owner.replace(/\/+$/, '');
      return (this.avoid.get(url) ?? 0) > Date.now() ? null : url;
    } catch {
      return null;
    }
  }

  private move(url: string): void {
    if (url === this.target) return;
    this.target = url;
    this.options.moved(url);
  }
}

/**
 * Whether the key may be sent to `owner`, a URL the map named: never from https down to http, and
 * never to a loopback or unspecified host unless the configured URL is one (a node that advertises
 * `http://127.0.0.1:…` must not turn a client of `https://vigil.example` to its own machine).
 */
export function trusted(owner: string, configured: string): boolean {
  let to: URL;
  let from: URL;
  try {
    to = new URL(owner);
    from = new URL(configured);
  } catch {
    return false;
  }
  if (to.protocol !== 'https:' && to.protocol !== 'http:') return false;
  if (from.protocol === 'https:' && to.protocol !== 'https:') return false;
  return !local(to.hostname) || local(from.hostname);
}

function local(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '0.0.0.0' || h === '::' || h === '::1' || h.startsWith('127.');
}
