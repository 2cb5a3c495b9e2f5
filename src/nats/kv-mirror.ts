import { jetstream, JetStreamApiCodes, JetStreamApiError, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { Empty, headers, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { Packr } from 'msgpackr';
import { silentLogger, type Logger } from '../log.js';
import { KvFeed } from './kv-feed.js';
import { whileSettling } from './stream-settling.js';
import { RevisionMap, type ChangeListener, type Versioned } from './revision-map.js';

export type { Versioned };

/** What every KV store of cluster mode is opened with. */
export interface KvBucketOptions {
  /** Replicas of a bucket this process creates (DESIGN §8: VIGIL_NATS_REPLICAS); an existing one keeps its own. */
  replicas: number;
  log?: Logger;
  /** How long a write or read waits for the server, in ms. Default 5000. */
  timeoutMs?: number;
}

export interface KvMirrorOptions<T> extends KvBucketOptions {
  bucket: string;
  /** Called on every change of the mirror, from the watch or a local write (for indexes). */
  onChange?: ChangeListener<T>;
}

export type CreateOutcome = { ok: true; revision: number } | { ok: false; reason: 'exists' };
export type UpdateOutcome = { ok: true; revision: number } | { ok: false; reason: 'conflict' };

/** Values are msgpack (DESIGN §6), as the LMDB tables hold them; they are not hashed. */
const packr = new Packr({ useRecords: false, moreTypes: false });

const OPERATION = 'KV-Operation';
const KEY = /^[-/_=.a-zA-Z0-9]+$/;

/**
 * A KV bucket mirrored in memory, so reads are synchronous: `get` answers from a map that a watch
 * (KvFeed) keeps up to date with every put and delete, made on any node.
 *
 * - `open` creates the bucket if it is absent (history 1, file storage, the given replicas;
 *   idempotent, so nodes starting together may all do it) and resolves once the values it held
 *   are in the map.
 * - A write resolves once the stream leader has stored it on a quorum of replicas; the map then
 *   holds it at once (read your writes on the writing node, before the watch echoes it).
 * - Every change carries its revision, and the map keeps the newest (RevisionMap), so an echo
 *   arriving after a newer write, or a resumed watch handing over something again, changes nothing.
 * - Other nodes see a write when their watch delivers it: one hop from the stream, typically a
 *   few milliseconds; reads there may trail by that much.
 *
 * Values handed out are the map's own: callers treat them as read-only. The connection is
 * borrowed; `close` stops only the watch.
 */
export class KvMirror<T> {
  private feed: KvFeed | null = null;
  private readonly subjectPrefix: string;

  private constructor(
    private readonly kv: KV,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    readonly bucket: string,
    private readonly map: RevisionMap<T>,
    private readonly log: Logger,
  ) {
    this.subjectPrefix = `$KV.${bucket}.`;
  }

  static async open<T>(nc: NatsConnection, options: KvMirrorOptions<T>): Promise<KvMirror<T>> {
    const log = options.log ?? silentLogger();
    const js = jetstream(nc, { timeout: options.timeoutMs ?? 5000 });
    const kv = await ensureBucket(js, options.bucket, options.replicas, log);
    const jsm = await js.jetstreamManager();
    const mirror = new KvMirror<T>(kv, js, jsm, options.bucket, new RevisionMap<T>(options.onChange), log);
    mirror.feed = await KvFeed.open({
      nc,
      jsm,
      // Its own, shorter timeout: a consumer that cannot be made (a server just restarted) is
      // tried again a second later rather than after the writes' 5 s.
      js: jetstream(nc, { timeout: Math.min(options.timeoutMs ?? 5000, 2000) }),
      stream: `KV_${options.bucket}`,
      subjects: `${mirror.subjectPrefix}>`,
      take: (m) => mirror.fromWatch(m),
      log,
    });
    return mirror;
  }

  get(key: string): T | undefined {
    return this.map.value(key);
  }

  /** The value and the revision that wrote it (for `update`). */
  entry(key: string): Versioned<T> | undefined {
    return this.map.get(key);
  }

  /** Every key that holds a value, with it. */
  entries(): IterableIterator<[string, T]> {
    return this.map.values();
  }

  get size(): number {
    return this.map.size;
  }

  async put(key: string, value: T): Promise<number> {
    const bytes = packr.pack(value);
    const revision = await this.kv.put(key, bytes);
    this.applyLocal(key, bytes, revision);
    return revision;
  }

  /** Stores `value` only if the key holds none (absent or deleted): of concurrent creates one wins. */
  async create(key: string, value: T): Promise<CreateOutcome> {
    const bytes = packr.pack(value);
    try {
      const revision = await this.kv.create(key, bytes);
      this.applyLocal(key, bytes, revision);
      return { ok: true, revision };
    } catch (error) {
      if (wrongLastSequence(error)) return { ok: false, reason: 'exists' };
      throw error;
    }
  }

  /**
   * Stores `value` only if the key is still at `revision` (compare and set). Not atomic on a
   * replicated bucket of nats-server before 2.9.21 (Debian's 2.9.10 included): the server checks
   * the revision before proposing the write, not in the replicated log, so concurrent updates at
   * one revision may all succeed (nats-server #4320). `create` (expected revision 0) is checked in
   * the log and is atomic on every version.
   */
  async update(key: string, value: T, revision: number): Promise<UpdateOutcome> {
    const bytes = packr.pack(value);
    try {
      const next = await this.kv.update(key, bytes, revision);
      this.applyLocal(key, bytes, next);
      return { ok: true, revision: next };
    } catch (error) {
      if (wrongLastSequence(error)) return { ok: false, reason: 'conflict' };
      throw error;
    }
  }

  /**
   * Deletes the key (a delete marker, as `kv.delete` writes). Published here rather than through
   * `kv.delete`, which does not return the marker's revision the map needs.
   */
  async delete(key: string): Promise<number> {
    if (!KEY.test(key)) throw new Error(`invalid key: ${key}`);
    const h = headers();
    h.set(OPERATION, 'DEL');
    const ack = await this.js.publish(this.subjectPrefix + key, Empty, { headers: h });
    this.map.apply(key, undefined, ack.seq);
    return ack.seq;
  }

  /**
   * The key's newest entry as the stream leader holds it, applied to the map: for a compare and
   * set that lost to a write the watch has not delivered yet.
   */
  async latest(key: string): Promise<Versioned<T> | undefined> {
    const message = await this.jsm.streams.getMessage(`KV_${this.bucket}`, { last_by_subj: this.subjectPrefix + key });
    if (message !== null) this.apply(key, message.header, message.data, message.seq);
    return this.map.get(key);
  }

  async close(): Promise<void> {
    await this.feed?.stop();
  }

  private fromWatch(message: JsMsg): void {
    this.apply(message.subject.slice(this.subjectPrefix.length), message.headers, message.data, message.seq);
  }

  private apply(key: string, header: MsgHdrs | undefined, data: Uint8Array, revision: number): void {
    const operation = header?.get(OPERATION) ?? '';
    if (operation === 'DEL' || operation === 'PURGE') {
      this.map.apply(key, undefined, revision);
      return;
    }
    let value: T;
    try {
      value = packr.unpack(data) as T;
    } catch (error) {
      // Not written by Vigil: kept out of the map, where it would break its readers.
      this.log.error({ bucket: this.bucket, key, revision, err: error }, 'kv value does not decode: skipped');
      return;
    }
    this.map.apply(key, value, revision);
  }

  /** The map holds its own copy, decoded from what was stored, never the caller's object. */
  private applyLocal(key: string, bytes: Uint8Array, revision: number): void {
    this.map.apply(key, packr.unpack(bytes) as T, revision);
  }
}

function wrongLastSequence(error: unknown): boolean {
  return error instanceof JetStreamApiError && (error.code === JetStreamApiCodes.StreamWrongLastSequence || error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);
}

/**
 * Opens the bucket, creating it if absent. Two nodes creating it at once with the same settings
 * both succeed (whileSettling waits out the moment the loser cannot see the winner's yet); with
 * different replicas the loser binds to the winner's, with a warning, as the ledger stream does.
 */
async function ensureBucket(js: JetStreamClient, bucket: string, replicas: number, log: Logger): Promise<KV> {
  const kvm = new Kvm(js);
  const kv = await whileSettling(() => kvm.create(bucket, { history: 1, replicas }));
  const status = await whileSettling(() => kv.status());
  if (status.replicas !== replicas) log.warn({ bucket, replicas: status.replicas, configured: replicas }, 'kv bucket kept with its own replica count');
  return kv;
}
