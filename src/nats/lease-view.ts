import type { KV, KvEntry, KvWatchEntry } from '@nats-io/kv';
import type { QueuedIterator } from '@nats-io/transport-node';
import type { Logger } from '../log.js';

/** The value of a lease or node key: who wrote it, on which node, when (ISO time, for people). */
export interface LeaseValue {
  holder: string;
  node: string;
  at: string;
  /** The public base URL of the holder's node (VIGIL_BASE_URL), once it listens: the partition map names owners by it. */
  url?: string;
}

/** The last write of one key as this node saw it arrive. */
export interface SeenKey {
  revision: number;
  /** A PUT (not a delete or purge marker). */
  put: boolean;
  holder: string | null;
  /** The base URL the value names, or null. */
  url: string | null;
  /** Local clock when this revision arrived (or when the watch first showed it). */
  seenAt: number;
}

/** The holder named by a lease or node key's value, or null if it is not one of ours. */
export function holderOf(entry: KvEntry): string | null {
  try {
    const value = entry.json<Partial<LeaseValue>>();
    return typeof value.holder === 'string' ? value.holder : null;
  } catch {
    return null;
  }
}

/** The base URL named by a lease or node key's value, or null (not one of ours, or written before its node listened). */
export function urlOf(entry: KvEntry): string | null {
  try {
    const value = entry.json<Partial<LeaseValue>>();
    return typeof value.url === 'string' ? value.url : null;
  } catch {
    return null;
  }
}

/**
 * What the lease bucket holds, as far as a KV watch has told this node. The watch reports writes
 * and deletes but not keys that expire (a bucket's ttl is the stream's max_age, which removes
 * messages silently), so a key counts as live only while it is renewed: a key whose last write
 * arrived longer ago than a lease (and a margin the caller chooses) is taken as expired. That
 * needs only the local clock, never the server's.
 *
 * The view is advisory: it chooses which partitions to try for and how many nodes share them.
 * Whether a claim or renewal wins is the KV's decision (create / update with revision).
 *
 * `reached(revision)` tells whether the watch has delivered up to a revision this node wrote; the
 * watch delivers in stream order, so the view then holds everything written before it. A watch
 * that falls behind (its consumer lost with a server) is replaced by `restart`, keeping what was
 * seen (a redelivered revision keeps its `seenAt`).
 */
export class LeaseView {
  private readonly seen = new Map<string, SeenKey>();
  private watch: QueuedIterator<KvWatchEntry> | null = null;
  private generation = 0;
  /** Highest revision the current watch delivered. */
  private revision = 0;
  private readonly waiters = new Set<{ revision: number; done: (reached: boolean) => void }>();
  private stopped = false;
  private starting = false;
  private startedAt = 0;

  constructor(
    private readonly kv: KV,
    private readonly now: () => number,
    private readonly log: Logger,
    private readonly onEntry: (key: string, seen: SeenKey) => void,
  ) {}

  /** Starts the watch; rejects if the watch's consumer cannot be made. */
  async start(): Promise<void> {
    const generation = ++this.generation;
    this.revision = 0;
    this.starting = true;
    this.startedAt = this.now();
    try {
      const watch = await this.kv.watch();
      if (this.stopped || generation !== this.generation) return watch.stop();
      this.watch = watch;
      void this.consume(watch, generation);
    } finally {
      if (generation === this.generation) this.starting = false;
    }
  }

  /**
   * Replaces the watch (behind, or ended), unless a new one is being made (in an election that
   * can take seconds). Failures are logged and left to the next restart.
   */
  restart(): void {
    if (this.starting || this.stopped) return;
    this.watch?.stop();
    this.watch = null;
    this.start().catch((error: unknown) => this.log.warn({ err: error }, 'lease view: watch could not be restarted'));
  }

  stop(): void {
    this.stopped = true;
    this.generation++;
    this.watch?.stop();
    this.watch = null;
    for (const waiter of this.waiters) waiter.done(false);
    this.waiters.clear();
  }

  /** How long ago the current watch was (re)started, in ms. */
  get age(): number {
    return this.now() - this.startedAt;
  }

  /** Whether a watch runs or is being made (it may still be behind: see `reached`). */
  get watching(): boolean {
    return this.watch !== null || this.starting;
  }

  /** Resolves true once the watch has delivered `revision`, false if not within `timeoutMs`. */
  reached(revision: number, timeoutMs: number): Promise<boolean> {
    if (this.revision >= revision) return Promise.resolve(true);
    if (this.stopped) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = {
        revision,
        done: (reached: boolean) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          resolve(reached);
        },
      };
      const timer = setTimeout(() => waiter.done(false), timeoutMs);
      timer.unref();
      this.waiters.add(waiter);
    });
  }

  get(key: string): SeenKey | undefined {
    return this.seen.get(key);
  }

  /** Whether `key` is held by anyone: written (not deleted), and that write seen within `withinMs`. */
  live(key: string, withinMs: number): boolean {
    const seen = this.seen.get(key);
    return seen !== undefined && seen.put && this.now() - seen.seenAt <= withinMs;
  }

  /** The live keys under `prefix` (e.g. `node.`), without the prefix. */
  liveUnder(prefix: string, withinMs: number): string[] {
    return [...this.seen.keys()].filter((key) => key.startsWith(prefix) && this.live(key, withinMs)).map((key) => key.slice(prefix.length));
  }

  /** Forgets keys not written for `ageMs` (expired long ago: node keys of processes gone). */
  prune(ageMs: number): void {
    const now = this.now();
    for (const [key, seen] of this.seen) if (now - seen.seenAt > ageMs) this.seen.delete(key);
  }

  private async consume(watch: QueuedIterator<KvWatchEntry>, generation: number): Promise<void> {
    try {
      for await (const entry of watch) {
        if (generation !== this.generation) break;
        this.apply(entry);
      }
    } catch (error) {
      if (generation === this.generation) this.log.warn({ err: error }, 'lease view: watch failed');
    }
    if (generation === this.generation) this.watch = null; // the next tick restarts it
  }

  private apply(entry: KvWatchEntry): void {
    const before = this.seen.get(entry.key);
    const put = entry.operation === 'PUT';
    const seen: SeenKey = {
      revision: entry.revision,
      put,
      holder: put ? holderOf(entry) : null,
      url: put ? urlOf(entry) : null,
      seenAt: before?.revision === entry.revision ? before.seenAt : this.now(),
    };
    this.seen.set(entry.key, seen);
    if (entry.revision > this.revision) this.revision = entry.revision;
    for (const waiter of this.waiters) if (this.revision >= waiter.revision) waiter.done(true);
    this.onEntry(entry.key, seen);
  }
}
