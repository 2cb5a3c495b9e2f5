import { jetstream, JetStreamApiCodes, JetStreamApiError, StorageType } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import { holderOf } from './lease-view.js';

/**
 * A write to the lease bucket: stored at `revision`; `refused` because the key is not at the
 * revision given (it exists, expired, or another holder wrote it); or `failed` (timeout, no
 * connection, no JetStream leader): the outcome is unknown, the write may still be stored.
 */
export type LeaseWrite = { ok: true; revision: number } | { ok: false; reason: 'refused' } | { ok: false; reason: 'failed'; error: unknown };

export interface LeaseBucketOptions {
  bucket: string;
  /** The ttl when this call creates the bucket. */
  ttlMs: number;
  replicas: number;
  log: Logger;
}

const REFUSED: LeaseWrite = { ok: false, reason: 'refused' };

function outcomeOf(error: unknown): LeaseWrite {
  const refused = error instanceof JetStreamApiError && (error.code === JetStreamApiCodes.StreamWrongLastSequence || error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);
  return refused ? REFUSED : { ok: false, reason: 'failed', error };
}

/**
 * The KV bucket of partition leases (DESIGN §8): history 1, ttl = the lease (the stream's
 * max_age: a key not written for a lease disappears), file storage so that a one-server NATS
 * restarting does not forget leases whose holders still act on them. Every write but `announce`
 * is conditional on a revision, so a holder can only ever change what it last wrote.
 */
export class LeaseBucket {
  private constructor(
    /** For lease writes: requests time out well within a lease, so one slow answer does not stall a round. */
    private readonly kv: KV,
    /** For the watch, with the client's default timeout (making a consumer in an election takes longer). */
    readonly watchKv: KV,
    /** The bucket's ttl: the lease, whoever created the bucket. */
    readonly ttlMs: number,
  ) {}

  /**
   * Creates the bucket if absent (idempotent: nodes may start together). An existing bucket keeps
   * its ttl, and that ttl is the lease (a node configured otherwise logs a warning), so all nodes
   * agree on how long a lease lasts.
   */
  static async open(nc: NatsConnection, options: LeaseBucketOptions): Promise<LeaseBucket> {
    const { bucket, ttlMs, replicas, log } = options;
    const watchKv = await new Kvm(nc).create(bucket, { history: 1, ttl: ttlMs, replicas, storage: StorageType.File });
    const ttl = (await watchKv.status()).ttl;
    if (!(ttl > 0)) throw new Error(`KV bucket ${bucket} has no ttl: leases in it would never expire`);
    if (ttl !== ttlMs) log.warn({ bucket, ttlMs: ttl, configuredMs: ttlMs }, 'lease bucket kept with its own ttl: leases last that long');
    const kv = await new Kvm(jetstream(nc, { timeout: Math.min(5000, Math.max(500, ttl / 2)) })).open(bucket);
    return new LeaseBucket(kv, watchKv, ttl);
  }

  /** Creates `key`: refused if it exists (a delete marker counts as absent). */
  async claim(key: string, value: string): Promise<LeaseWrite> {
    try {
      return { ok: true, revision: await this.kv.create(key, value) };
    } catch (error) {
      return outcomeOf(error);
    }
  }

  /**
   * Updates `key` if it is still at `revision`. Refused, the key is read once: an earlier renewal
   * stored after its answer timed out leaves `holder`'s own value at a newer revision, and the
   * lease goes on from there (the update at that revision is just as conditional).
   */
  async renew(key: string, value: string, revision: number, holder: string): Promise<LeaseWrite> {
    const first = await this.update(key, value, revision);
    if (first.ok || first.reason === 'failed') return first;
    try {
      const current = await this.kv.get(key);
      if (current === null || current.operation !== 'PUT' || holderOf(current) !== holder || current.revision === revision) return REFUSED;
      return await this.update(key, value, current.revision);
    } catch (error) {
      return outcomeOf(error);
    }
  }

  /** Deletes `key` if it is still at `revision`. */
  async release(key: string, revision: number): Promise<LeaseWrite> {
    try {
      await this.kv.delete(key, { previousSeq: revision });
      return { ok: true, revision };
    } catch (error) {
      return outcomeOf(error);
    }
  }

  /** Writes `key` whatever it holds: for a node's own announcement, which only that node writes. */
  async announce(key: string, value: string): Promise<LeaseWrite> {
    try {
      return { ok: true, revision: await this.kv.put(key, value) };
    } catch (error) {
      return outcomeOf(error);
    }
  }

  /** Deletes `key` whatever it holds (a node's announcement, on close). */
  async retract(key: string): Promise<LeaseWrite> {
    try {
      await this.kv.delete(key);
      return { ok: true, revision: 0 };
    } catch (error) {
      return outcomeOf(error);
    }
  }

  private async update(key: string, value: string, revision: number): Promise<LeaseWrite> {
    try {
      return { ok: true, revision: await this.kv.update(key, value, revision) };
    } catch (error) {
      return outcomeOf(error);
    }
  }
}
