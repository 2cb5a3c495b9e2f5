import { randomBytes } from 'node:crypto';
import { pack, unpack } from 'msgpackr';
import WebSocket from 'ws';
import type { z } from 'zod';
import type { IngestResult as GateResult } from '../domain/org-state.js';
import type { ingestEventBody } from '../domain/schemas.js';
import type { Receipt } from '../domain/signed-note.js';
import { OwnerFinder } from './owner-finder.js';

/** An event as a runtime sends it (the `POST /events/` body; defaults filled by the server). */
export type VigilEvent = z.input<typeof ingestEventBody>;
/** An event's result: its gate decision, and its signed receipt when the client asks for receipts. */
export type IngestResult = GateResult & { receipt?: Receipt };
export type { Receipt };

export interface VigilClientOptions {
  /** The server's base URL, `http://host:port` (the stream is at `ws://host:port/events/stream`). */
  url: string;
  /** An API key with events:write. */
  key: string;
  /** `auto` (default): the stream, falling back to `POST /events/batch` where it cannot upgrade. */
  transport?: 'auto' | 'websocket' | 'http';
  /** Stream frames as `json` (default) or `msgpack`. */
  encoding?: 'json' | 'msgpack';
  /** Events per frame (1–1000, default 500). */
  maxBatch?: number;
  /** How long an event may wait for others to share its frame (ms, default 5). */
  lingerMs?: number;
  /** Frames sent and not yet answered (default 16; the server refuses past its own limit, 64). */
  maxInFlight?: number;
  /** Reconnect backoff: first wait and cap (ms; default 100 and 5000, doubling, with jitter). */
  backoff?: { initialMs?: number; maxMs?: number };
  /** Prefix of the idempotency keys given to events without one (default: random per client). */
  keyPrefix?: string;
  /**
   * Events the client holds unanswered, at most (default 100,000): past it `ingest` rejects at once
   * with `overloaded`, so a runtime producing faster than the server takes sees it instead of
   * growing without bound. Retry after some are answered (or after `flush()`).
   */
  maxQueued?: number;
  /**
   * Ask for a signed receipt with every result (`Prefer: receipt`, DESIGN §10): each result then
   * carries `receipt`, which anyone can check against the server's published log key. Default off:
   * a receipt costs the server one Ed25519 signature an event.
   */
  receipts?: boolean;
  /**
   * Owner-aware sending, for cluster mode (README: The runtime client, and Cluster mode): the client reads the
   * partition map (`GET /cluster/map` of `url`) and sends to the node owning the key's org, so
   * nothing is forwarded between nodes. It reads the map again every `refreshMs` (default
   * 10,000) and after a failure, and falls back to `url` whenever the owner cannot be reached or
   * the map cannot be read. Default off: everything goes to `url`, which forwards.
   */
  discover?: boolean | { refreshMs?: number };
}

/**
 * The idempotency key the client gives its `n`th event: its prefix (random per client unless
 * chosen) and `n`. One client's keys share the prefix, so the server's key index (a B-tree) takes
 * them near one another rather than all over it (the stream bench sends keys made by this).
 */
export function clientKey(prefix: string, n: number): string {
  return `${prefix}-${n}`;
}

/** An event the server refused (its `{error}` result), or the client closed before it was answered. */
export class VigilClientError extends Error {
  override name = 'VigilClientError';
  constructor(
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

interface Waiting {
  event: VigilEvent & { idempotency_key: string };
  /** The event's JSON size in UTF-8 bytes: frames are cut to stay under the server's 1 MiB. */
  size: number;
  resolve: (result: IngestResult) => void;
  reject: (error: Error) => void;
}

interface Frame {
  id: number;
  entries: Waiting[];
  /** HTTP: a request for it is under way (a retry of the others must not send it twice). */
  posting?: boolean;
}

/** Frames stay under this many bytes of events (the server refuses frames over 1 MiB). */
const MAX_FRAME_BYTES = 900 * 1024;
/** The largest event sent (its UTF-8 JSON): alone in a frame, with the frame's envelope, it stays within the server's 1 MiB. */
const MAX_EVENT_BYTES = 1024 * 1024 - 1024;

type Outcome = IngestResult | { error: { code: string; message: string; details?: unknown } };
type ServerAnswer = { id?: unknown; results?: Outcome[]; error?: { code: string; message: string; details?: unknown } };

/** A refusal (of a frame, or of one event) that a retry with the same keys may get past. */
const RETRIED = new Set(['overloaded', 'unavailable', 'rate_limited']);

/**
 * A client for agent runtimes (DESIGN §9). `ingest(event)` resolves with that event's gate decision
 * once it is durable. Events are batched into frames by size and time and streamed over one
 * WebSocket; every event is given an idempotency key if it has none, so a frame sent again after a
 * reconnect (every frame not answered is) or an `overloaded` answer is recorded once. Where the
 * stream cannot be opened (a proxy without WebSocket, an older server), frames go as
 * `POST /events/batch` requests instead. Exactly once holds within the server's idempotency window,
 * which is the ledger's life (README, Idempotency keys). `close()` sends what is queued and waits
 * for every answer.
 */
export class VigilClient {
  private readonly opts: Required<Omit<VigilClientOptions, 'backoff' | 'discover'>> & { backoff: { initialMs: number; maxMs: number } };
  /** With `discover`: where the key's org's owner is; null: always `url`. */
  private readonly owner: OwnerFinder | null;
  /** Sockets closed on purpose (the owner moved): their close is no failure. */
  private readonly retired = new WeakSet<WebSocket>();
  private queue: Waiting[] = [];
  /** Frames sent (or to send again) and not answered, by id, in order. */
  private readonly unanswered = new Map<number, Frame>();
  private nextFrame = 1;
  private nextKey = 0;
  private timer: NodeJS.Timeout | null = null;
  private ws: WebSocket | null = null;
  private connecting: Promise<void> | null = null;
  private useHttp: boolean;
  private failures = 0;
  /** The one pending reconnect (or HTTP retry), so failures never multiply timers. */
  private retryTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** Events refused for now and waiting to be queued again. */
  private requeued = 0;
  private idle: (() => void)[] = [];
  /** With `discover`: the first map read is done. */
  private ownerKnown = false;
  /** Events given to `ingest` and not yet settled. */
  private held = 0;

  constructor(options: VigilClientOptions) {
    const maxBatch = options.maxBatch ?? 500;
    if (!Number.isInteger(maxBatch) || maxBatch < 1 || maxBatch > 1000) throw new RangeError('maxBatch is 1–1000');
    const maxQueued = options.maxQueued ?? 100_000;
    if (!Number.isInteger(maxQueued) || maxQueued < 1) throw new RangeError('maxQueued is a positive integer');
    this.opts = {
      url: options.url.replace(/\/+$/, ''),
      key: options.key,
      transport: options.transport ?? 'auto',
      encoding: options.encoding ?? 'json',
      maxBatch,
      lingerMs: options.lingerMs ?? 5,
      maxInFlight: options.maxInFlight ?? 16,
      backoff: { initialMs: options.backoff?.initialMs ?? 100, maxMs: options.backoff?.maxMs ?? 5000 },
      keyPrefix: options.keyPrefix ?? `c-${randomBytes(6).toString('hex')}`,
      maxQueued,
      receipts: options.receipts ?? false,
    };
    this.useHttp = this.opts.transport === 'http';
    const discover = options.discover ?? false;
    const refreshMs = typeof discover === 'object' ? (discover.refreshMs ?? 10_000) : 10_000;
    if (!(refreshMs >= 100)) throw new RangeError('discover.refreshMs is at least 100');
    this.owner = discover === false ? null : new OwnerFinder({ url: this.opts.url, key: this.opts.key, refreshMs, moved: () => this.moved() });
  }

  /** Where frames go now: the org's owner (with `discover`) or the configured URL. */
  private get target(): string {
    return this.owner?.url ?? this.opts.url;
  }

  /** Sends one event; resolves with its result once durable, rejects with VigilClientError if refused. */
  ingest(event: VigilEvent): Promise<IngestResult> {
    if (this.closed) return Promise.reject(new VigilClientError('closed', 'the client is closed'));
    if (this.held >= this.opts.maxQueued) {
      return Promise.reject(new VigilClientError('overloaded', `the client holds ${this.held} events not yet answered (maxQueued); send this one again once some are`));
    }
    const keyed = { ...event, idempotency_key: event.idempotency_key ?? clientKey(this.opts.keyPrefix, ++this.nextKey) };
    const size = Buffer.byteLength(JSON.stringify(keyed));
    // Alone in a frame it would still pass the server's 1 MiB: refused here, not sent (and answered `overloaded`) forever.
    if (size > MAX_EVENT_BYTES) {
      return Promise.reject(new VigilClientError('payload_too_large', `the event is ${size} bytes of JSON; a frame or batch holds at most ${MAX_EVENT_BYTES}`));
    }
    this.held++;
    return new Promise((resolve, reject) => {
      const settled = (): void => void this.held--;
      this.queue.push({
        event: keyed,
        size,
        resolve: (result) => (settled(), resolve(result)),
        reject: (error) => (settled(), reject(error)),
      });
      if (this.queue.length >= this.opts.maxBatch) this.pump();
      else this.timer ??= setTimeout(() => this.pump(), this.opts.lingerMs);
    });
  }

  /** Resolves once every event given so far is answered. */
  flush(): Promise<void> {
    this.pump();
    if (this.queue.length === 0 && this.unanswered.size === 0 && this.requeued === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /**
   * Sends what is queued, waits for every answer, then closes the connection. With `timeoutMs`,
   * events still unanswered then are rejected with `closed` (each may or may not be recorded:
   * sent again with its idempotency key, by any client, it is recorded once).
   */
  async close(options: { timeoutMs?: number } = {}): Promise<void> {
    const { timeoutMs } = options;
    if (timeoutMs === undefined) await this.flush();
    else {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.flush(), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
      clearTimeout(timer);
    }
    this.closed = true;
    this.owner?.close();
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.failAll(new VigilClientError('closed', 'the client closed before this event was answered; it may or may not be recorded: send it again with its idempotency key'));
    this.ws?.close();
    this.ws = null;
  }

  /** Cuts frames from the queue and sends them, within the in-flight limit. */
  private pump(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (this.queue.length > 0 && this.unanswered.size < this.opts.maxInFlight) {
      let count = 0;
      let bytes = 0;
      while (count < this.queue.length && count < this.opts.maxBatch && (count === 0 || bytes + this.queue[count]!.size <= MAX_FRAME_BYTES)) bytes += this.queue[count++]!.size;
      const frame: Frame = { id: this.nextFrame++, entries: this.queue.splice(0, count) };
      this.unanswered.set(frame.id, frame);
      this.send(frame);
    }
    if (this.queue.length > 0 && this.unanswered.size < this.opts.maxInFlight) this.timer ??= setTimeout(() => this.pump(), this.opts.lingerMs);
    this.settleIdle();
  }

  private send(frame: Frame): void {
    if (this.owner !== null && !this.ownerKnown) {
      // The first frames wait for the first map read (bounded), rather than go to `url` and move.
      void this.owner.ready.then(() => {
        this.ownerKnown = true;
        if (this.unanswered.has(frame.id)) this.send(frame);
      });
      return;
    }
    if (this.useHttp) {
      void this.post(frame);
      return;
    }
    if (this.ws?.readyState === WebSocket.OPEN) {
      const body = { id: frame.id, events: frame.entries.map((e) => e.event) };
      this.ws.send(this.opts.encoding === 'msgpack' ? pack(body) : JSON.stringify(body), { binary: this.opts.encoding === 'msgpack' });
      return;
    }
    void this.connect(); // every unanswered frame is sent once the socket opens
  }

  /** Request headers: the key, and `Prefer: receipt` when receipts are asked for. */
  private headers(more: Record<string, string>): Record<string, string> {
    return { authorization: `Bearer ${this.opts.key}`, ...(this.opts.receipts ? { prefer: 'receipt' } : {}), ...more };
  }

  private connect(): Promise<void> {
    if (this.connecting !== null || this.closed || this.ws?.readyState === WebSocket.OPEN) return this.connecting ?? Promise.resolve();
    const protocol = this.opts.encoding === 'msgpack' ? 'vigil.v1+msgpack' : 'vigil.v1+json';
    const target = this.target;
    const ws = new WebSocket(`${target.replace(/^http/, 'ws')}/events/stream`, [protocol], { headers: this.headers({}) });
    let opened = false;
    const connecting: Promise<void> = new Promise<void>((resolve) => {
      let refused = false;
      const done = (): void => {
        // A socket closing after the next one began connecting leaves that one's promise in place.
        if (this.connecting === connecting) this.connecting = null;
        resolve();
      };
      ws.once('open', () => {
        opened = true;
        if (target !== this.target) {
          // The owner moved while this socket opened: to the new one instead.
          this.retired.add(ws);
          ws.close();
          done();
          void this.connect();
          return;
        }
        this.ws = ws;
        this.failures = 0;
        done();
        for (const frame of this.unanswered.values()) this.send(frame);
      });
      ws.once('unexpected-response', (_req, res) => {
        const status = res.statusCode ?? 0;
        res.resume();
        refused = true; // the close that follows is this refusal's, not another failure
        done();
        ws.terminate();
        if (status === 401 || status === 403) return this.failAll(new VigilClientError(status === 401 ? 'unauthorized' : 'forbidden', `the server refused the key (${status})`));
        if (this.opts.transport === 'auto' && status !== 503 && status !== 429) {
          this.useHttp = true; // the stream is not there: batches over HTTP from now on
          for (const frame of this.unanswered.values()) this.send(frame);
          return;
        }
        this.retryLater();
      });
      ws.on('message', (data: Buffer, isBinary: boolean) => this.answered((isBinary ? unpack(data) : JSON.parse(data.toString('utf8'))) as ServerAnswer));
      ws.once('close', (code: number) => {
        if (this.ws === ws) this.ws = null;
        done();
        if (refused || this.closed || this.retired.has(ws)) return;
        // An owner unreachable, or gone without a close handshake: the configured URL at once.
        if (this.owner !== null && target !== this.opts.url && (!opened || code === 1006)) {
          this.owner.failed(target);
          if (this.unanswered.size > 0) void this.connect();
          return;
        }
        if (this.unanswered.size > 0) this.retryLater();
      });
      ws.on('error', () => undefined); // followed by close
    });
    this.connecting = connecting;
    return connecting;
  }

  private retryLater(): void {
    if (this.closed || this.retryTimer !== null) return;
    const { initialMs, maxMs } = this.opts.backoff;
    const wait = Math.min(maxMs, initialMs * 2 ** this.failures++) * (0.5 + Math.random() / 2);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this.useHttp) for (const frame of this.unanswered.values()) this.send(frame);
      else void this.connect();
    }, wait);
  }

  private answered(message: ServerAnswer): void {
    const frame = typeof message.id === 'number' ? this.unanswered.get(message.id) : undefined;
    if (frame === undefined) return;
    if (message.results !== undefined) return this.settle(frame, message.results);
    const error = message.error ?? { code: 'internal', message: 'an answer without results' };
    if (RETRIED.has(error.code)) {
      // Sent again after a pause, with the same keys: nothing is recorded twice.
      setTimeout(() => this.send(frame), this.opts.backoff.initialMs).unref();
      return;
    }
    this.unanswered.delete(frame.id);
    for (const entry of frame.entries) entry.reject(new VigilClientError(error.code, error.message, error.details));
    this.pump();
  }

  private settle(frame: Frame, results: readonly Outcome[]): void {
    this.unanswered.delete(frame.id);
    const again: Waiting[] = [];
    frame.entries.forEach((entry, i) => {
      const outcome = results[i];
      if (outcome === undefined) entry.reject(new VigilClientError('internal', 'no result for this event'));
      else if (!('error' in outcome)) entry.resolve(outcome);
      // Refused for now (the org's queue full, its writer unreachable): again later, same key.
      else if (RETRIED.has(outcome.error.code)) again.push(entry);
      else entry.reject(new VigilClientError(outcome.error.code, outcome.error.message, outcome.error.details));
    });
    if (again.length > 0) {
      this.requeued += again.length;
      setTimeout(() => {
        this.requeued -= again.length;
        if (this.closed) {
          for (const entry of again) entry.reject(new VigilClientError('closed', 'the client closed before this event was answered; send it again with its idempotency key'));
          return this.settleIdle();
        }
        this.queue.unshift(...again);
        this.pump();
      }, this.opts.backoff.initialMs);
    }
    this.pump();
  }

  private async post(frame: Frame): Promise<void> {
    if (frame.posting === true) return;
    frame.posting = true;
    try {
      await this.postOnce(frame);
    } finally {
      frame.posting = false;
    }
  }

  private async postOnce(frame: Frame): Promise<void> {
    let res: Response;
    const target = this.target;
    try {
      res = await fetch(`${target}/events/batch`, {
        method: 'POST',
        headers: this.headers({ 'content-type': 'application/json' }),
        body: JSON.stringify({ events: frame.entries.map((e) => e.event) }),
      });
    } catch {
      if (this.owner !== null && target !== this.opts.url) {
        this.owner.failed(target); // the owner is unreachable: the configured URL, at once
        return this.postOnce(frame);
      }
      return this.retryLater(); // the server is unreachable: the same frame again, later
    }
    const body = (await res.json().catch(() => null)) as { results?: Outcome[]; error?: { code: string; message: string } } | null;
    if (res.ok && body?.results !== undefined) {
      this.failures = 0;
      return this.settle(frame, body.results);
    }
    const error = body?.error ?? { code: 'internal', message: `HTTP ${res.status}` };
    if (RETRIED.has(error.code) || res.status >= 500) return this.retryLater();
    this.answered({ id: frame.id, error });
  }

  /**
   * The owner moved (or the client fell back): the socket to the old place is closed and the
   * frames it had unanswered go to the new one (same keys: recorded once). Over HTTP, requests
   * under way finish where they went; the next go to the new place.
   */
  private moved(): void {
    const ws = this.ws;
    if (ws === null) return;
    this.retired.add(ws);
    this.ws = null;
    ws.close();
    if (this.unanswered.size > 0) void this.connect();
  }

  private failAll(error: VigilClientError): void {
    for (const frame of this.unanswered.values()) for (const entry of frame.entries) entry.reject(error);
    this.unanswered.clear();
    for (const entry of this.queue.splice(0)) entry.reject(error);
    this.settleIdle();
  }

  private settleIdle(): void {
    if (this.queue.length === 0 && this.unanswered.size === 0 && this.requeued === 0) for (const resolve of this.idle.splice(0)) resolve();
  }
}
