import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import type { BatchHandler, CommittedBatch } from '../bus/ledger-log.js';
import type { Logger } from '../log.js';
import { decodeBatch, unpackBatch } from './batch-codec.js';
import { orgOfSubject } from './ledger-stream.js';
import { StreamFeed } from './stream-feed.js';

export interface SubscriptionArgs {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  from: { startSeq: number; held: ReadonlyMap<string, number> };
  handler: BatchHandler;
  log: Logger;
  /** Called once the subscription has stopped. */
  onEnd(subscription: LedgerFeed): void;
}

/**
 * Feeds a handler the ledger stream from a start sequence (StreamFeed: every message once, in
 * stream order, so per org in seq order; a lost consumer is replaced by the feed itself), each
 * message decoded as a committed batch less what the subscriber holds. A handler that throws is
 * logged and the next batch still comes.
 */
export type LedgerFeed = StreamFeed;

export function openLedgerFeed(args: SubscriptionArgs): Promise<LedgerFeed> {
  return StreamFeed.open({
    js: args.js,
    jsm: args.jsm,
    stream: args.stream,
    name: 'ledger',
    startSeq: args.from.startSeq,
    deliver: (message) => {
      const batch = toBatch(message, (org) => args.from.held.get(org) ?? 0, args.log);
      if (batch !== null) args.handler(batch);
    },
    log: args.log,
    onEnd: (feed) => args.onEnd(feed),
  });
}

/**
 * The batch a message carries, less the org's rows through `heldThrough(org)` (null if that is all of it). A
 * message that does not decode is a broken invariant of the stream: logged and skipped, so the
 * consumer of this batch sees a gap in the org's seqs rather than a dead subscription.
 */
export function toBatch(message: JsMsg, heldThrough: (org: string) => number, log: Logger): CommittedBatch | null {
  if (message.data.length === 0) return null; // the layout marker (ledger-migration.ts): a batch never is empty
  const org = orgOfSubject(message.subject);
  try {
    const batch = unpackBatch(message.data);
    const after = heldThrough(org);
    if (batch.first + batch.rows.length - 1 <= after) return null;
    return { org, rows: decodeBatch(batch, after + 1), fence: message.seq };
  } catch (error) {
    log.error({ org, streamSeq: message.seq, err: error }, 'ledger message does not decode: skipped');
    return null;
  }
}
