import type { Consumer, ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import type { BatchHandler, CommittedBatch } from '../bus/ledger-log.js';
import type { Logger } from '../log.js';
import { decodeBatch, unpackBatch } from './batch-codec.js';

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

/** How long a failed renewal waits before the next try. */
const RETRY_MS = 1000;

/**
 * Pulls expire after 5 s with a server heartbeat every second: two missed heartbeats (the server
 * holding the consumer is gone; R1 consumers are not replicated) are noticed in about 2 s, where
 * the client's defaults (30 s / 15 s) would leave the feed silent for half a minute.
 */
const PULL = { expires: 5000, idle_heartbeat: 1000 };

/** What the client reports when the consumer it pulls from is gone or is being replaced. */
const LOST = new Set(['reset', 'heartbeats_missed', 'consumer_deleted', 'consumer_not_found', 'stream_not_found']);

/**
 * Feeds a handler the stream from a start sequence through an ordered consumer: every message
 * once, in stream order (so per org in seq order), with no acks to keep. A handler that throws
 * is logged and the next batch still comes.
 *
 * When the consumer is lost (its server died or restarted, a message was missed) the feed makes
 * a new one itself, from the message after the last it handed over, rather than leave it to the
 * client: @nats-io/jetstream 3.4's ordered reset keeps the old pull's pending count, which stalls
 * delivery until the pull expires. Messages of a replaced consumer are ignored from then on, so
 * nothing is handed twice or out of order.
 */
export class LedgerFeed {
  private delivered: number;
  private generation = 0;
  private current: { consumer: Consumer; messages: ConsumerMessages } | null = null;
  private stopped = false;
  private ending: Promise<void> | null = null;
  private replayedTo = 0;
  private replayed: (error?: Error) => void = () => undefined;

  private constructor(private readonly args: SubscriptionArgs) {
    this.delivered = args.from.startSeq - 1;
  }

  /** Resolves once the messages in the stream when it was called have been handed over. */
  static async open(args: SubscriptionArgs): Promise<LedgerFeed> {
    const feed = new LedgerFeed(args);
    feed.replayedTo = (await args.jsm.streams.info(args.stream)).state.last_seq;
    const replay = new Promise<void>((resolve, reject) => {
      feed.replayed = (error) => (error === undefined ? resolve() : reject(error));
    });
    if (feed.replayedTo <= feed.delivered) feed.replayed();
    try {
      await feed.begin();
      await replay;
    } catch (error) {
      await feed.stop();
      throw error;
    }
    return feed;
  }

  /** Stops delivery at once (no batch is handed after it is called) and removes the consumer. */
  stop(): Promise<void> {
    this.stopped = true;
    this.replayed(new Error('the ledger subscription was stopped before its replay ended'));
    this.ending ??= this.retire().finally(() => this.args.onEnd(this));
    return this.ending;
  }

  private async begin(): Promise<void> {
    const generation = ++this.generation;
    const consumer = await this.args.js.consumers.get(this.args.stream, { opt_start_seq: this.delivered + 1 });
    const messages = await consumer.consume({
      ...PULL,
      callback: (m) => {
        if (generation === this.generation) this.take(m);
      },
    });
    this.current = { consumer, messages };
    if (this.stopped) {
      await this.retire(); // stopped while it was being made
      return;
    }
    void (async () => {
      for await (const status of messages.status()) {
        if (LOST.has(status.type) && generation === this.generation) return this.renew(status.type);
      }
    })();
    void messages.closed().then((result) => {
      if (generation === this.generation && !this.stopped) this.renew(result instanceof Error ? result.message : 'closed');
    });
  }

  /** Replaces the consumer; before the replay has ended a failure fails `open` instead. */
  private renew(why: string): void {
    this.args.log.warn({ stream: this.args.stream, delivered: this.delivered, why }, 'ledger subscription renews its consumer');
    this.generation++;
    const attempt = async (): Promise<void> => {
      await this.retire();
      if (this.stopped) return;
      try {
        await this.begin();
      } catch (error) {
        if (this.delivered < this.replayedTo) return this.replayed(error instanceof Error ? error : new Error(String(error)));
        this.args.log.warn({ stream: this.args.stream, error: String(error) }, 'ledger subscription cannot renew its consumer yet; retrying');
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
        return attempt();
      }
    };
    void attempt();
  }

  private async retire(): Promise<void> {
    const current = this.current;
    this.current = null;
    if (current === null) return;
    await current.messages.close().then(
      () => current.consumer.delete(),
      () => undefined,
    ).catch(() => undefined); // gone with its connection: the server drops it when inactive
  }

  private take(message: JsMsg): void {
    if (this.stopped || message.seq <= this.delivered) return;
    this.delivered = message.seq;
    const batch = toBatch(message, `${this.args.subjectPrefix}.`, this.args.from.held, this.args.log);
    if (batch !== null) {
      try {
        this.args.handler(batch);
      } catch (error) {
        this.args.log.error({ org: batch.org, error: String(error) }, 'subscriber failed');
      }
    }
    if (message.seq >= this.replayedTo) this.replayed();
  }
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
    log.error({ org, streamSeq: message.seq, error: String(error) }, 'ledger message does not decode: skipped');
    return null;
  }
}
