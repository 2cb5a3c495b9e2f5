import type { JetStreamClient } from '@nats-io/jetstream';
import type { DeliveryIds } from '../actors/delivery-scope.js';
import { webhookSubject, type WebhookStreamNames } from './webhook-stream.js';

export interface DeliveryIdBlocksOptions {
  names: WebhookStreamNames;
  /** Shown in the reservation messages (which node took a block). */
  holder: string;
  /** The org's highest delivery id stored (WebhookReplica.lastDeliveryIdOf). */
  lastIdOf: (org: string) => number;
}

/** Ids in a block, and the most one `take` may ask for. */
export const DELIVERY_ID_BLOCK = 4096;

/**
 * Delivery ids in cluster mode: unique across the cluster and increasing per org. A node reserves
 * a block by publishing a message to `<prefix>.ids` of the webhook stream: JetStream gives every
 * message its own stream sequence s, and the block is ids (s - 1) × 4096 + 1 … s × 4096. No two
 * nodes can get one sequence, so no two blocks meet, with no compare-and-set (which nats-server
 * 2.9 does not serialize on a replicated stream, nats-io/nats-server#4320); a later reservation
 * has a later sequence, so a higher block. Ids of a block are handed out in order.
 *
 * Increasing per org: a node about to write an org whose highest id is at or above its next one
 * (another node wrote the org since this node took its block) reserves a new block, above every
 * block reserved so far. Ids left in a block given up are never used (gaps).
 */
export class DeliveryIdBlocks implements DeliveryIds {
  readonly maxTake = DELIVERY_ID_BLOCK;
  /** The block in hand: ids next … end - 1. */
  private next = 0;
  private end = 0;
  private reserving: Promise<void> | null = null;
  private readonly subject: string;

  constructor(
    private readonly js: JetStreamClient,
    private readonly options: DeliveryIdBlocksOptions,
  ) {
    this.subject = webhookSubject(options.names, { kind: 'ids' });
  }

  take(org: string, count: number, reserved = false): number | Promise<number> {
    if (!Number.isInteger(count) || count < 1 || count > DELIVERY_ID_BLOCK) throw new RangeError(`delivery ids are taken 1 to ${DELIVERY_ID_BLOCK} at a time, not ${count}`);
    const last = this.options.lastIdOf(org);
    if (this.next > last && this.end - this.next >= count) {
      const first = this.next;
      this.next += count;
      return first;
    }
    // A fresh block is above every id made from blocks; an org's id above it came from elsewhere.
    if (reserved && this.next <= last) throw new Error(`org ${org} has delivery id ${last}, above every block of ids reserved`);
    return this.reserve().then(() => this.take(org, count, true));
  }

  /** One reservation at a time here: later callers wait for it, then take from it (or reserve again). */
  private reserve(): Promise<void> {
    this.reserving ??= this.js
      .publish(this.subject, this.options.holder)
      .then((ack) => {
        this.next = (ack.seq - 1) * DELIVERY_ID_BLOCK + 1;
        this.end = ack.seq * DELIVERY_ID_BLOCK + 1;
      })
      .finally(() => {
        this.reserving = null;
      });
    return this.reserving;
  }
}
