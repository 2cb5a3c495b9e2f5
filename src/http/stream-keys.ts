import type { Scope } from '../domain/schemas.js';
import type { Logger } from '../log.js';
import type { Registry } from '../services/registry.js';
import type { KeyRecord } from '../store/registry-store.js';

/** The close a stream gets when its key no longer lets it write (RFC 6455 §7.4.2: 4000-4999 are the application's). */
export interface KeyClose {
  code: number;
  reason: string;
}

/** The key was revoked (or is gone): as HTTP's 401. */
export const KEY_REVOKED: KeyClose = { code: 4401, reason: 'key revoked' };
/** The key no longer holds the scope the stream needs: as HTTP's 403. */
export const KEY_FORBIDDEN: KeyClose = { code: 4403, reason: 'key lacks events:write' };

/** How often open streams' keys are checked: an idle stream whose key was revoked is closed within this (and the store's lag). */
export const KEY_CHECK_MS = 500;

/** An open stream as the watch sees it: its key, and how to close it. */
export interface WatchedStream {
  readonly key: KeyRecord;
  end(close: KeyClose): void;
}

/**
 * Keeps open streams to their keys' current state. `check` is for every frame, before it is
 * decided (a read of the key's record in memory: LMDB's or the KV mirror's); the sweep, every
 * KEY_CHECK_MS while any stream is open, closes streams that send nothing. A revocation is seen
 * once this node's store holds it: at once in embedded mode (the CLI's too), through the KV
 * watch in cluster mode (milliseconds). The timer runs only while streams are open.
 */
export class StreamKeyWatch {
  private readonly streams = new Set<WatchedStream>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly registry: Registry,
    private readonly scope: Scope,
    private readonly log: Logger,
    private readonly everyMs = KEY_CHECK_MS,
  ) {}

  /** Why `key` may no longer write on a stream, or null while it may. */
  check(key: KeyRecord): KeyClose | null {
    const now = this.registry.current(key);
    if (now === undefined) return KEY_REVOKED;
    return now.scopes.includes(this.scope) ? null : KEY_FORBIDDEN;
  }

  add(stream: WatchedStream): void {
    this.streams.add(stream);
    if (this.timer === null) {
      this.timer = setInterval(() => this.sweep(), this.everyMs);
      this.timer.unref();
    }
  }

  delete(stream: WatchedStream): void {
    this.streams.delete(stream);
    if (this.streams.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  get size(): number {
    return this.streams.size;
  }

  private sweep(): void {
    try {
      // A stream's end may delete it from the set while it is walked: a Set allows that.
      for (const stream of this.streams) {
        const close = this.check(stream.key);
        if (close !== null) stream.end(close);
      }
    } catch (error) {
      // A timer's throw would end the process; the next sweep (and every frame) checks again.
      this.log.error({ err: error }, 'checking the keys of open streams failed');
    }
  }
}
