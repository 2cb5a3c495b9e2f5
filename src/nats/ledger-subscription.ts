import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import type { BatchHandler, CommittedBatch } from '../bus/ledger-log.js';
import type { Logger } from '../log.js';
import { decodeBatch, unpackBatch } from './batch-codec.js';
import { StreamFeed } from './stream-feed.js';

export interface SubscriptionArgs {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  subjectPrefix: string;
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
  const prefix = `${args.subjectPrefix}.`;
  return StreamFeed.open({
    js: args.js,
    jsm: args.jsm,
    stream: args.stream,
    name: 'ledger',
    startSeq: args.from.startSeq,
    deliver: (message) => {
      const batch = toBatch(message, prefix, args.from.held, args.log);
      if (batch !== null) args.handler(batch);
    },
    log: args.log,
    onEnd: (feed) => args.onEnd(feed),
  });
}

/**
 * The batch a message carries, less what the subscriber holds (null if it holds it all). A
 * message that does not decode is a broken invariant of the stream: logged and skipped, so the
 * consumer of this batch sees a gap in the org's seqs rather than a dead subscription.
 */
function toBatch(message: JsMsg, prefix: string, held: ReadonlyMap<string, number>, log: Logger): CommittedBatch | null {
  const org = message.subject.startsWith(prefix) ? message.subject.slice(prefix.length) : message.subject;
  try {
    const batch = unpackBatch(message.data);
    const after = held.get(org) ?? 0;
    if (batch.first + batch.rows.length - 1 <= after) return null;
    return { org, rows: decodeBatch(batch, after + 1), fence: message.seq };
  } catch (error) {
    log.error({ org, streamSeq: message.seq, err: error }, 'ledger message does not decode: skipped');
    return null;
  }
}
