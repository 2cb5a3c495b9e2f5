import { DeliverPolicy, type Consumer, type ConsumerMessages, type JetStreamClient, type JetStreamManager, type JsMsg, type OrderedConsumerOptions } from '@nats-io/jetstream';
import type { NatsConnection, Status } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import { LOST, PULL, RETRY_MS } from './feed-consumer.js';
import { StallWatch } from './stall-watch.js';

export interface KvFeedArgs {
  nc: NatsConnection;
  js: JetStreamClient;
  /** Asks the stream's last revision (see StallWatch). */
  jsm: JetStreamManager;
  /** The bucket's stream, `KV_<bucket>`. */
  stream: string;
  /** Its subjects, `$KV.<bucket>.>`. */
  subjects: string;
  /** Handed each message once, in stream order; what it throws is logged. */
  take(message: JsMsg): void;
  log: Logger;
  /** See StallWatch (tests). */
  stallMs?: number;
}

/**
 * A KV bucket's watch: the last value of every key, then every change, each message once and in
 * stream (revision) order, through an ordered consumer this feed makes and remakes itself.
 *
 * Why not `kv.watch()`: in @nats-io/kv 3.4 it is an ordered push consumer whose idle heartbeat the
 * client fixes at 30 s, so when the server holding it dies (kill -9, or a cluster node other than
 * the one connected to) the watch is silent for a minute before the client remakes it. Here, as in
 * LedgerFeed, a pull with a 1 s heartbeat notices the loss in about 2 s, and after a reconnect the
 * feed remakes its consumer at once; either way it resumes from the revision after the last it
 * handed over: whatever changed meanwhile arrives, nothing twice. It ends on its own when the
 * connection is closed.
 *
 * `open` resolves once the values in the bucket when it was called have been handed over (the
 * consumer's pending count reached 0), and rejects if the feed cannot be made or is lost first.
 */
export class KvFeed {
  private delivered = 0;
  private generation = 0;
  private current: { consumer: Consumer; messages: ConsumerMessages } | null = null;
  /** The one loop that (re)makes the consumer, while it runs; `wanted` asks it for another round. */
  private making: Promise<void> | null = null;
  private wanted = false;
  private stopped = false;
  private ending: Promise<void> | null = null;
  private loaded = false;
  private settle: (error?: Error) => void = () => undefined;
  private readonly statuses: AsyncIterable<Status>;
  private readonly stall: StallWatch;

  private constructor(private readonly args: KvFeedArgs) {
    this.statuses = args.nc.status();
    this.stall = new StallWatch(args, { delivered: () => this.delivered, active: () => !this.stopped && this.current !== null, renew: (why) => this.renew(why) });
  }

  static async open(args: KvFeedArgs): Promise<KvFeed> {
    const feed = new KvFeed(args);
    const initial = new Promise<void>((resolve, reject) => {
      feed.settle = (error) => (error === undefined ? resolve() : reject(error));
    });
    void feed.followConnection();
    feed.remake();
    try {
      await initial;
    } catch (error) {
      await feed.stop();
      throw error;
    }
    return feed;
  }

  /** Stops delivery at once (nothing is handed over after it is called) and removes the consumer. */
  stop(): Promise<void> {
    this.stopped = true;
    this.stall.stop();
    // The client's status iterator (a QueuedIterator) has stop(); the type declares AsyncIterable only.
    (this.statuses as Partial<{ stop(): void }>).stop?.();
    this.settle(new Error(`the watch of ${this.args.stream} was stopped before its initial values were loaded`));
    this.ending ??= (async () => {
      await this.making;
      await this.retire();
    })();
    return this.ending;
  }

  /**
   * After a reconnect the consumer may be gone (its server restarted) or alive elsewhere, and the
   * client would find out only after its pull expires and two heartbeats are missed (5-10 s). A
   * new consumer from the next revision costs one request and catches up at once.
   */
  private async followConnection(): Promise<void> {
    for await (const status of this.statuses) {
      if (this.stopped) return;
      if (status.type === 'reconnect') this.renew('reconnect');
    }
  }

  private renew(why: string): void {
    if (this.stopped) return;
    this.args.log.warn({ stream: this.args.stream, delivered: this.delivered, why }, 'kv watch renews its consumer');
    this.remake();
  }

  /**
   * Has the consumer replaced, by one loop at a time: a request while a consumer is being made
   * (a reconnect in the middle) makes the loop go round again, so no consumer is left behind. What
   * the current consumer hands over from now on is ignored. Before the initial values are in, a
   * failure fails `open`; after, it is retried every second.
   */
  private remake(): void {
    this.generation++;
    this.wanted = true;
    this.making ??= (async () => {
      while (this.wanted && !this.stopped) {
        this.wanted = false;
        await this.retire();
        if (this.args.nc.isClosed()) {
          void this.stop();
          return;
        }
        try {
          await this.begin();
        } catch (error) {
          if (!this.loaded) return this.settle(error instanceof Error ? error : new Error(String(error)));
          this.args.log.warn({ stream: this.args.stream, err: error }, 'kv watch cannot renew its consumer yet; retrying');
          this.wanted = true;
          await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
        }
      }
    })().finally(() => (this.making = null));
  }

  private async begin(): Promise<void> {
    const generation = ++this.generation;
    // First the last value per key; once anything was handed over, every message after it (a key
    // written twice meanwhile arrives twice, in order, and ends at its newest value).
    const options: Partial<OrderedConsumerOptions> =
      this.delivered === 0
        ? { filter_subjects: this.args.subjects, deliver_policy: DeliverPolicy.LastPerSubject }
        : { filter_subjects: this.args.subjects, opt_start_seq: this.delivered + 1 };
    const consumer = await this.args.js.consumers.get(this.args.stream, options);
    const pending = (await consumer.info(true)).num_pending;
    const messages = await consumer.consume({
      ...PULL,
      callback: (m) => {
        if (generation === this.generation) this.take(m);
      },
    });
    this.current = { consumer, messages };
    this.stall.started();
    if (this.stopped || generation !== this.generation) return; // retired by stop, or by the next round
    if (pending === 0) this.markLoaded();
    void (async () => {
      for await (const status of messages.status()) {
        if (LOST.has(status.type) && generation === this.generation) return this.renew(status.type);
      }
    })();
    void messages.closed().then((result) => {
      if (generation === this.generation) this.renew(result instanceof Error ? result.message : 'closed');
    });
  }

  private async retire(): Promise<void> {
    const current = this.current;
    this.current = null;
    if (current === null) return;
    await current.messages.close().then(
      () => current.consumer.delete(),
      () => undefined,
    ).catch(() => undefined); // gone with its server or connection: the server drops it when inactive
  }

  private take(message: JsMsg): void {
    if (this.stopped) return;
    if (message.seq > this.delivered) {
      this.delivered = message.seq;
      this.stall.delivered();
      try {
        this.args.take(message);
      } catch (error) {
        this.args.log.error({ stream: this.args.stream, revision: message.seq, err: error }, 'kv watch handler failed');
      }
    }
    if (message.info.pending === 0) this.markLoaded();
  }

  private markLoaded(): void {
    if (this.loaded) return;
    this.loaded = true;
    this.settle();
  }
}
