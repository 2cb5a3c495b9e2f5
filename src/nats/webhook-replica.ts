import type { Database } from 'lmdb';
import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { ensureError, VigilError } from '../errors.js';
import type { Logger } from '../log.js';
import { within } from '../time-bound.js';
import type { LmdbWebhookStore } from '../store/lmdb-webhook-store.js';
import type { WebhookRecord } from '../store/webhook-store.js';
import { StreamFeed } from './stream-feed.js';
import { decodeWebhookMessage, orgSubjects, parseWebhookSubject, type WebhookStreamNames } from './webhook-stream.js';

export interface WebhookReplicaOptions {
  /** Where the replica keeps its watermark (a table of this node's LMDB, shared with the ledger replica's). */
  meta: Database<number, string>;
  names: WebhookStreamNames;
  /** How long a read or a write waits for the replica before 503. Default 5000 ms. */
  waitMs?: number;
  log: Logger;
}

const WATERMARK = 'webhooks';
/** Meta key of a subject's last message seen (`seen:<subject>`). */
const SEEN = 'seen:';
/** The header every write carries: the sequence of the subject's last message as its writer saw it. */
const EXPECTED = 'Nats-Expected-Last-Subject-Sequence';
/** Refused stream sequences kept for writers to ask about (they are rare). */
const REFUSALS_KEPT = 10_000;

interface Waiter {
  seq: number;
  resolve: () => void;
  reject: (error: Error) => void;
}

/**
 * This node's copy of the `VIGIL_WEBHOOKS` stream (cluster mode): every message is applied, in
 * stream order, to the node's LmdbWebhookStore, so the store's synchronous reads (webhooks,
 * deliveries, cursors, billing counts) answer from local LMDB, the same on every node once it has
 * applied the same messages. Applying is idempotent (records replace records; the billing counter
 * moves by the difference), so a restart resumes from a watermark saved after each message and
 * a deleted data dir is rebuilt from the whole stream.
 *
 * Fencing is checked here too, not only by JetStream: a message is applied only if its
 * Nats-Expected-Last-Subject-Sequence is the sequence of the message before it on its subject.
 * nats-server 2.9 may accept two concurrent writes presenting the same sequence to a replicated
 * stream (nats-io/nats-server#4320, fixed in later releases); every node applies the stream in
 * the same order, so every node keeps the first and skips the other alike, and its writer is told
 * (`refused`). A write presents its subject's last message as this copy has applied it (`fence`:
 * what its writer decided from includes it); the check compares with the last one received.
 * Both are kept in memory and, once applied, in the meta table, so a restart knows them.
 *
 * Local writes are issued as messages arrive (LMDB keeps their order) and their bookkeeping is
 * chained: the watermark moves once a write is durable, then webhook watchers are told.
 */
export class WebhookReplica {
  /** Per subject, the stream sequence of its last message received (applied or refused): what the fence check compares with. */
  private readonly seen = new Map<string, number>();
  /** Per subject, the stream sequence of its last message whose processing here is done: what a write presents. */
  private readonly done = new Map<string, number>();
  /** Stream sequences refused by the fence check, oldest first. */
  private readonly refusals = new Set<number>();
  private watermark: number;
  /** Per org, its highest delivery id, once asked for (then kept up to date as messages arrive). */
  private readonly lastIds = new Map<string, number>();
  /** Per org, its delivery cursor (never moved back). */
  private readonly cursors: Map<string, number>;
  private readonly watchers: ((webhook: WebhookRecord) => void)[] = [];
  private waiters: Waiter[] = [];
  private feed: StreamFeed | null = null;
  private tail: Promise<unknown> = Promise.resolve();
  private failed: Error | null = null;

  private constructor(
    private readonly local: LmdbWebhookStore,
    private readonly jsm: JetStreamManager,
    private readonly options: WebhookReplicaOptions,
  ) {
    this.watermark = options.meta.get(WATERMARK) ?? 0;
    this.cursors = local.deliveryCursors();
  }

  /** Catches the local store up with the stream, then follows it live. */
  static async start(js: JetStreamClient, jsm: JetStreamManager, local: LmdbWebhookStore, options: WebhookReplicaOptions): Promise<WebhookReplica> {
    const replica = new WebhookReplica(local, jsm, options);
    replica.feed = await StreamFeed.open({
      js,
      jsm,
      stream: options.names.stream,
      name: 'webhook store',
      startSeq: replica.watermark + 1,
      deliver: (message) => replica.onMessage(message),
      log: options.log,
      onEnd: () => undefined,
    });
    await replica.tail;
    if (replica.failed !== null) {
      await replica.feed.stop();
      throw replica.failed;
    }
    return replica;
  }

  /** Called with every webhook record applied from now on, in stream order. */
  watch(listener: (webhook: WebhookRecord) => void): void {
    this.watchers.push(listener);
  }

  /** Resolves once every message up to stream sequence `seq` is applied here (bounded: else 503). */
  waitFor(seq: number, ms = this.options.waitMs ?? 5000): Promise<void> {
    if (this.failed !== null) return Promise.reject(stopped(this.failed));
    if (this.watermark >= seq) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { seq, resolve, reject };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(unavailable('this node\'s copy of the webhook store trails the stream; try again'));
      }, Math.max(0, ms));
      waiter.resolve = () => {
        clearTimeout(timer);
        resolve();
      };
      waiter.reject = (error) => {
        clearTimeout(timer);
        reject(error);
      };
      this.waiters.push(waiter);
    });
  }

  /** Resolves once this copy holds the org's last webhook or delivery write as of now (bounded: else 503). */
  async caughtUp(org: string): Promise<void> {
    const end = Date.now() + (this.options.waitMs ?? 5000);
    const last = await within(this.lastSeq(orgSubjects(this.options.names, org)), end - Date.now(), () => {
      throw unavailable('the webhook stream did not answer in time');
    });
    if (last > 0) await this.waitFor(last, end - Date.now());
  }

  /**
   * The fence of a write to `subject`: the stream sequence of its last message as this copy has
   * applied it (0: none), so what the writer decided from (the webhook registry, the org's
   * deliveries) includes it. A write presenting it is refused if another node wrote the subject since.
   */
  fence(subject: string): number {
    return this.done.get(subject) ?? this.stored(subject);
  }

  /** The last message received on `subject`. */
  private lastSeen(subject: string): number {
    return this.seen.get(subject) ?? this.stored(subject);
  }

  /** The subject's last message as the meta table has it (a start knows every subject up to its watermark). */
  private stored(subject: string): number {
    return this.options.meta.get(SEEN + subject) ?? 0;
  }

  /** Whether the message at `seq`, once applied here (waitFor), was refused by the fence check. */
  refused(seq: number): boolean {
    return this.refusals.has(seq);
  }

  /** The org's highest delivery id stored (0: none). */
  lastDeliveryIdOf(org: string): number {
    let last = this.lastIds.get(org);
    if (last === undefined) {
      last = this.local.lastDeliveryIdOf(org);
      this.lastIds.set(org, last);
    }
    return last;
  }

  /** The org's stored delivery cursor (0: none). */
  cursorOf(org: string): number {
    return this.cursors.get(org) ?? 0;
  }

  async close(): Promise<void> {
    await this.feed?.stop();
    await this.tail;
    for (const w of this.waiters) w.reject(unavailable('the webhook store is closing'));
    this.waiters = [];
  }

  private async lastSeq(subject: string): Promise<number> {
    if (this.failed !== null) throw stopped(this.failed);
    try {
      const message = await this.jsm.streams.getMessage(this.options.names.stream, { last_by_subj: subject });
      return message?.seq ?? 0;
    } catch (error) {
      throw unavailable('the webhook stream did not answer', error);
    }
  }

  private onMessage(message: JsMsg): void {
    if (this.failed !== null) return;
    const seq = message.seq;
    const subject = parseWebhookSubject(this.options.names, message.subject);
    let write: Promise<unknown> | null = null;
    let webhook: WebhookRecord | null = null;
    const expected = message.headers?.get(EXPECTED);
    const fenced = expected !== undefined && expected !== '' && Number(expected) !== this.lastSeen(message.subject);
    this.seen.set(message.subject, seq);
    if (fenced) this.refuse(seq);
    try {
      if (subject !== null && subject.kind !== 'ids' && !fenced) {
        const body = decodeWebhookMessage(message.data);
        if (body.type === 'webhook') {
          webhook = body.webhook;
          write = this.local.putWebhook(webhook);
        } else {
          const org = subject.org;
          const known = this.lastDeliveryIdOf(org);
          let top = known;
          for (const d of body.deliveries) if (d.id > top) top = d.id;
          this.lastIds.set(org, top);
          let cursors: Map<string, number> | undefined;
          if (body.cursor !== null && body.cursor > this.cursorOf(org)) {
            this.cursors.set(org, body.cursor);
            cursors = new Map([[org, body.cursor]]);
          }
          write = this.local.putDeliveries(body.deliveries, cursors);
        }
      }
    } catch (error) {
      // A message this version cannot read: a broken invariant of the stream, skipped like a bad ledger message.
      this.options.log.error({ subject: message.subject, streamSeq: seq, err: ensureError(error) }, 'webhook stream message does not decode: skipped');
    }
    this.tail = this.tail.then(async () => {
      if (this.failed !== null) return;
      try {
        await write;
      } catch (error) {
        this.failed = ensureError(error);
        this.options.log.error({ streamSeq: seq, err: this.failed }, 'webhook store replica stopped: a message could not be applied');
        for (const w of this.waiters) w.reject(stopped(this.failed));
        this.waiters = [];
        return;
      }
      this.landed(message.subject, seq, webhook);
    });
  }

  private refuse(seq: number): void {
    this.refusals.add(seq);
    if (this.refusals.size > REFUSALS_KEPT) this.refusals.delete(this.refusals.values().next().value!);
  }

  private landed(subject: string, seq: number, webhook: WebhookRecord | null): void {
    this.done.set(subject, seq);
    this.watermark = Math.max(this.watermark, seq);
    // The subject's first: if the watermark is kept, so is this (LMDB commits writes in order).
    void this.options.meta.put(SEEN + subject, seq);
    void this.options.meta.put(WATERMARK, this.watermark);
    if (webhook !== null) {
      for (const watcher of this.watchers) {
        try {
          watcher(webhook);
        } catch (error) {
          this.options.log.error({ org: webhook.org, err: ensureError(error) }, 'webhook watcher failed');
        }
      }
    }
    if (this.waiters.length === 0) return;
    const still: Waiter[] = [];
    for (const w of this.waiters) {
      if (w.seq <= this.watermark) w.resolve();
      else still.push(w);
    }
    this.waiters = still;
  }
}

function unavailable(message: string, cause?: unknown): VigilError {
  return new VigilError('unavailable', message, undefined, { retryAfterSeconds: 1, ...(cause === undefined ? {} : { cause }) });
}

function stopped(cause: Error): VigilError {
  return unavailable('this node\'s copy of the webhook store stopped; try another node', cause);
}
