import { createHash } from 'node:crypto';
import { canonicalize } from './jcs.js';
import { rowLeafHash, type LedgerRow } from './ledger.js';
import type { IngestResult } from './org-state.js';
import type { EventRecordBody } from './records.js';
import type { IngestEventBody } from './schemas.js';

/**
 * Idempotency keys (DESIGN §9). An event sent with a key is recorded with it (`idempotency_key` in
 * its ledger record), so the key survives restarts and failover with the ledger itself. A later
 * event of the org with the same key records nothing: it is answered the first one's result, or
 * 409 `idempotency_conflict` if it asks for something else.
 */

/**
 * What a key recorded answers: the first event's result, a digest of what it asked, and where its
 * record sits in the log (a retry asking for a receipt gets the first one's).
 */
export interface KeyedEvent {
  seq: number;
  result: IngestResult;
  digest: string;
  recordedAt: string;
  leafHash: Buffer;
}

/**
 * A digest of what an event asks (agent, type, payload, dti, source, actor): two requests with one
 * key are the same request if their digests are equal. `payloadJson` is the payload's JCS text.
 */
export function requestDigest(agentId: string, e: Pick<EventRecordBody, 'event_type' | 'dti' | 'source' | 'actor'>, payloadJson: string): string {
  const text = JSON.stringify([agentId, e.event_type, e.dti ?? null, e.source ?? 'self', e.actor ?? null]) + payloadJson;
  return createHash('sha256').update(text).digest('base64url');
}

export function digestOfRequest(event: IngestEventBody): string {
  return requestDigest(event.agent_id, event, canonicalize(event.payload));
}

/** What a recorded event with a key answers, from its ledger row and record. */
export function keyedFromRecord(row: LedgerRow, agentId: string, body: EventRecordBody): KeyedEvent {
  return {
    seq: row.seq,
    recordedAt: row.recordedAt,
    leafHash: rowLeafHash(row),
    digest: requestDigest(agentId, body, canonicalize(body.payload)),
    result: {
      event_id: body.event_id,
      action_id: body.action_id,
      gate_status: body.gate_status,
      bii: body.bii,
      composite_trust: body.composite_trust ?? body.bii,
      reason: body.reason ?? '',
      requires_human_review: body.requires_human_review,
    },
  };
}

/**
 * The keys an org's writer decided lately, newest last, at most `limit`: what its store cannot
 * answer yet (batches in flight; in cluster mode, rows the local replica has not received yet).
 */
export class RecentKeys {
  private readonly keys = new Map<string, KeyedEvent>();
  /**
   * The keys in the order added, oldest first from `head` (an entry whose key was added again
   * since is stale and skipped). A queue, not the Map's own order: evicting from a Map's head
   * leaves deleted slots its every iteration walks past again.
   */
  private order: [string, KeyedEvent][] = [];
  private head = 0;
  /** The last seq known durable: only keys at or below it may be evicted (the store answers them). */
  private durable = 0;

  constructor(private readonly limit = 10_000) {}

  /** Rows through `seq` are durable (in the store's index, in embedded mode). */
  durableThrough(seq: number): void {
    if (seq > this.durable) this.durable = seq;
    this.evict();
  }

  get(key: string): KeyedEvent | undefined {
    return this.keys.get(key);
  }

  add(key: string, keyed: KeyedEvent): void {
    this.keys.set(key, keyed);
    this.order.push([key, keyed]);
    this.evict();
  }

  /** Past the limit, the oldest keys go, but never one whose row is not durable yet. */
  private evict(): void {
    while (this.keys.size > this.limit && this.head < this.order.length) {
      const [key, keyed] = this.order[this.head]!;
      if (this.keys.get(key) === keyed) {
        if (keyed.seq > this.durable) break;
        this.keys.delete(key);
      }
      this.head++;
    }
    // Stale entries pile up past the live keys only when keys are added again: compact then too.
    // (Not for every key evicted under a small limit: each compaction copies what is left.)
    if (this.head > Math.max(this.limit, 1024) || this.order.length - this.head > 2 * this.keys.size + 1024) this.compact();
  }

  private compact(): void {
    this.order = this.order.slice(this.head).filter(([key, keyed]) => this.keys.get(key) === keyed);
    this.head = 0;
  }

  /** Forgets keys of rows past `seq`: their batch was not written (the writer rebuilt from the ledger). */
  dropAbove(seq: number): void {
    for (const [key, keyed] of this.keys) if (keyed.seq > seq) this.keys.delete(key);
    this.compact();
    this.durable = Math.min(this.durable, seq);
  }
}
