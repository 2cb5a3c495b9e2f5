import type { Consumer, ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import type { Logger } from '../log.js';
import { LOST, PULL, RETRY_MS } from './feed-consumer.js';
import { StallWatch } from './stall-watch.js';

export interface StreamFeedArgs {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  /** What the feed is of, in its log lines (`ledger`: "ledger subscription renews its consumer"). */
  name: string;
  /** The first stream sequence handed over. */
  startSeq: number;
  /** Takes one message; one that throws is logged and the next message still comes. */
  deliver: (message: JsMsg) => void;
  log: Logger;
  /** Called once the feed has stopped. */
  onEnd(feed: StreamFeed): void;
  /** See StallWatch (tests). */
  stallMs?: number;
}

/**
 * Feeds a stream, from a start sequence, to `deliver` through an ordered consumer: every message
 * once, in stream order, with no acks to keep.
 *
 * When the consumer is lost (its server died or restarted, a message was missed) the feed makes
 * a new one itself, from the message after the last it handed over, rather than leave it to the
 * client: @nats-io/jetstream 3.4's ordered reset keeps the old pull's pending count, which stalls
 * delivery until the pull expires. Messages of a replaced consumer are ignored from then on, so
 * nothing is handed twice or out of order. A consumer silent while the stream holds more is
 * replaced too (StallWatch).
 */
export class StreamFeed {
  private delivered: number;
  private generation = 0;
  private current: { consumer: Consumer; messages: ConsumerMessages } | null = null;
  private stopped = false;
  private ending: Promise<void> | null = null;
  private replayedTo = 0;
  private replayed: (error?: Error) => void = () => undefined;
  private readonly stall: StallWatch;

  private constructor(private readonly args: StreamFeedArgs) {
    this.delivered = args.startSeq - 1;
    this.stall = new StallWatch(args, { delivered: () => this.delivered, active: () => !this.stopped && this.current !== null, renew: (why) => this.renew(why) });
  }

  /** Resolves once the messages in the stream when it was called have been handed over. */
  static async open(args: StreamFeedArgs): Promise<StreamFeed> {
    const feed = new StreamFeed(args);
    const replay = new Promise<void>((resolve, reject) => {
      feed.replayed = (error) => (error === undefined ? resolve() : reject(error));
    });
    replay.catch(() => undefined); // rejected by stop() below when nothing awaits it any more: not unhandled
    try {
      feed.replayedTo = (await args.jsm.streams.info(args.stream)).state.last_seq;
      if (feed.replayedTo <= feed.delivered) feed.replayed();
      await feed.begin();
      await replay;
    } catch (error) {
      await feed.stop();
      throw error;
    }
    return feed;
  }

  /** Stops delivery at once (no message is handed after it is called) and removes the consumer. */
  stop(): Promise<void> {
    this.stopped = true;
    this.stall.stop();
    this.replayed(new Error(`the ${this.args.name} subscription was stopped before its replay ended`));
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
    this.stall.started();
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
    this.args.log.warn({ stream: this.args.stream, delivered: this.delivered, why }, `${this.args.name} subscription renews its consumer`);
    this.generation++;
    const attempt = async (): Promise<void> => {
      await this.retire();
      if (this.stopped) return;
      try {
        await this.begin();
      } catch (error) {
        if (this.delivered < this.replayedTo) return this.replayed(error instanceof Error ? error : new Error(String(error)));
        this.args.log.warn({ stream: this.args.stream, err: error }, `${this.args.name} subscription cannot renew its consumer yet; retrying`);
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
    this.stall.delivered();
    try {
      this.args.deliver(message);
    } catch (error) {
      this.args.log.error({ stream: this.args.stream, streamSeq: message.seq, err: error }, `${this.args.name} subscriber failed`);
    }
    if (message.seq >= this.replayedTo) this.replayed();
  }
}
