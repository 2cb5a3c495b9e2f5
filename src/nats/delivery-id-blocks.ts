import { JetStreamApiCodes, JetStreamApiError, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { DeliveryIds } from '../actors/delivery-scope.js';
import { webhookSubject, type WebhookStreamNames } from './webhook-stream.js';

export interface DeliveryIdBlocksOptions {
  names: WebhookStreamNames;
  /** Ids reserved at a time. Default 1000. */
  blockSize?: number;
  /** The org's highest delivery id stored (WebhookReplica.lastDeliveryIdOf). */
  lastIdOf: (org: string) => number;
}

/** Tries of one reservation before it gives up (each refusal means another node reserved meanwhile). */
const MAX_TRIES = 20;
const text = new TextDecoder();

/**
 * Delivery ids in cluster mode: unique across the cluster and increasing per org. The counter is
 * the last message on `<prefix>.ids` of the webhook stream (the highest id reserved so far); a
 * node reserves a block of ids by publishing the counter moved past it, presenting the sequence of
 * the message it read (compare-and-set: of nodes reserving at once one wins, the others read
 * again). Ids of one block are handed out in order; a block is never handed out twice.
 *
 * Increasing per org: a node about to write an org whose highest id is at or above its next id
 * (another node wrote the org since this node reserved its block) reserves a new block, which
 * starts above every id reserved so far. Ids left in an abandoned block are never used (gaps).
 */
export class DeliveryIdBlocks implements DeliveryIds {
  /** The block in hand: ids next … end - 1. */
  private next = 0;
  private end = 0;
  private reserving: Promise<void> | null = null;
  private readonly subject: string;

  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly options: DeliveryIdBlocksOptions,
  ) {
    this.subject = webhookSubject(options.names, { kind: 'ids' });
  }

  take(org: string, count: number): number | Promise<number> {
    const floor = this.options.lastIdOf(org);
    if (this.next > floor && this.end - this.next >= count) {
      const first = this.next;
      this.next += count;
      return first;
    }
    return this.reserve(Math.max(count, this.options.blockSize ?? 1000), floor).then(() => this.take(org, count));
  }

  /** One reservation at a time here: later callers wait for it, then take from it (or reserve again). */
  private reserve(size: number, floor: number): Promise<void> {
    this.reserving ??= this.reserveNow(size, floor).finally(() => {
      this.reserving = null;
    });
    return this.reserving;
  }

  private async reserveNow(size: number, floor: number): Promise<void> {
    for (let i = 0; i < MAX_TRIES; i++) {
      const last = await this.jsm.streams.getMessage(this.options.names.stream, { last_by_subj: this.subject });
      const reserved = last === null ? 0 : Number(text.decode(last.data));
      if (!Number.isSafeInteger(reserved) || reserved < 0) throw new Error(`the delivery id counter holds ${JSON.stringify(text.decode(last!.data))}, not an id`);
      const from = Math.max(reserved, floor) + 1;
      const to = from + size - 1;
      try {
        await this.js.publish(this.subject, String(to), { expect: { lastSubjectSequence: last?.seq ?? 0 } });
      } catch (error) {
        if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence) continue;
        throw error;
      }
      this.next = from;
      this.end = to + 1;
      return;
    }
    throw new Error(`no block of delivery ids reserved after ${MAX_TRIES} tries: the counter kept moving`);
  }
}
