import { jetstream, jetstreamManager, JetStreamApiCodes, JetStreamApiError, type JetStreamClient, type JetStreamManager, type MsgRequest, type PubAck } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { LedgerRow } from '../domain/ledger.js';
import type { AppendOutcome, BatchHandler, CommittedBatch, Fence, LedgerCapability, LedgerLog, Position, Subscription } from '../bus/ledger-log.js';
import type { Logger } from '../log.js';
import { decodeBatch, encodeBatches, sameBatch, unpackBatch } from './batch-codec.js';
import { ensureLedgerStream, LEDGER_STREAM, ledgerSubject, type LedgerStreamNames } from './ledger-stream.js';
import { migrateEarlierLayout } from './ledger-migration.js';
import { openLedgerFeed, type LedgerFeed } from './ledger-subscription.js';

export interface JetStreamLedgerLogOptions extends Partial<LedgerStreamNames> {
  /** Replicas of the stream when this log creates it (DESIGN §8: VIGIL_NATS_REPLICAS). Default 1. */
  replicas?: number;
  /** How long an append waits for the stream's ack, in ms. Default 5000. */
  timeoutMs?: number;
  log: Logger;
}

/**
 * JetStream's position: the stream sequence a replay starts at, and what the subscriber holds
 * per org (whole batches it holds are not handed again, held rows are cut from the rest).
 */
export interface JetStreamPosition extends Position {
  adapter: 'jetstream';
  startSeq: number;
  held: ReadonlyMap<string, number>;
}

const CONFLICT: AppendOutcome = { ok: false, reason: 'conflict' };
/** Messages one fetch of `readWhole` asks for, and how long it waits for them. */
const WHOLE_FETCH = 1000;
const WHOLE_FETCH_MS = 2000;
/** The server's default max_payload, if it does not say. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/**
 * The ledger log of cluster mode (DESIGN §8): the `VIGIL_LEDGER` stream, one message per
 * committed batch of one org on `vigil.ledger.<partition>.<org>`, with `Nats-Msg-Id: <org>:<first seq>` and
 * `Nats-Expected-Last-Subject-Sequence` = the fence, which is the stream sequence of the org's
 * previous batch (0: none). JetStream refuses a stale or second writer; an append resolves once
 * the stream leader has stored the batch on a quorum of replicas (its fsync is the server's).
 *
 * Duplicates: JetStream checks the msg id before the fence, so a publish whose id is already
 * stored (within the stream's duplicate window, 2 minutes by default) is acked with the stored
 * message's sequence whatever its fence. Such an append is the same append retried (its ack was
 * lost) only if the stored batch holds the same rows, byte for byte, and is still the org's last:
 * then it is ok with the stored sequence; anything else is a conflict. A retry after the window
 * meets the fence and is a conflict; the writer then reads its rows back like any new owner.
 *
 * No capabilities: on nats-server 2.9 there is no atomic batch publish and a fence is known only
 * from the ack, so appends of one org go one at a time; subscribers are fed by a consumer, after
 * the append resolves, not before.
 *
 * Connection: `open` borrows one (the runtime shares it with KV and the command router; `close`
 * stops only what this log started), `connect` makes one the log owns and drains on `close`.
 */
export class JetStreamLedgerLog implements LedgerLog {
  readonly capabilities: readonly LedgerCapability[] = [];
  private readonly subscriptions = new Set<LedgerFeed>();
  private closed = false;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    /** The stream and subjects this log reads and appends to. */
    readonly names: LedgerStreamNames,
    private readonly options: JetStreamLedgerLogOptions,
    private readonly ownsConnection: boolean,
  ) {}

  /** A log over a connection the caller keeps (and closes after this log). Creates the stream if absent. */
  static open(nc: NatsConnection, options: JetStreamLedgerLogOptions): Promise<JetStreamLedgerLog> {
    return JetStreamLedgerLog.create(nc, options, false);
  }

  /** A log with its own connection to `servers`, drained and closed with it. */
  static async connect(servers: string[], options: JetStreamLedgerLogOptions): Promise<JetStreamLedgerLog> {
    const nc = await connect({ servers, maxReconnectAttempts: -1 });
    try {
      return await JetStreamLedgerLog.create(nc, options, true);
    } catch (error) {
      await nc.close();
      throw error;
    }
  }

  private static async create(nc: NatsConnection, options: JetStreamLedgerLogOptions, owns: boolean): Promise<JetStreamLedgerLog> {
    const names: LedgerStreamNames = {
      stream: options.stream ?? LEDGER_STREAM.stream,
      subjectPrefix: options.subjectPrefix ?? LEDGER_STREAM.subjectPrefix,
      partitions: options.partitions ?? LEDGER_STREAM.partitions,
    };
    const timeout = options.timeoutMs ?? 5000;
    const jsm = await jetstreamManager(nc, { timeout });
    await ensureLedgerStream(jsm, names, options.replicas ?? 1, options.log);
    const js = jetstream(nc, { timeout });
    await migrateEarlierLayout(js, jsm, names, options.log);
    return new JetStreamLedgerLog(nc, js, jsm, names, options, owns);
  }

  /**
   * One message, or, for a batch over the server's max_payload, several consecutive ones, each
   * fenced on the one before. Only the first can meet another writer's fence (a conflict, nothing
   * written); a later part refused or lost throws, like any append whose outcome is unknown, and
   * the writer reads back what landed.
   */
  async append(org: string, rows: readonly LedgerRow[], expected: Fence): Promise<AppendOutcome> {
    if (rows.length === 0) return { ok: true, fence: expected };
    const subject = ledgerSubject(this.names, org);
    const payloads = encodeBatches(rows, this.nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD);
    let fence = expected;
    for (const [i, { first, payload }] of payloads.entries()) {
      const outcome = await this.appendOne(org, subject, first, payload, fence);
      if (!outcome.ok) {
        if (i === 0) return outcome;
        throw new Error(`part ${i + 1} of ${payloads.length} of a split ledger batch of org ${org} was refused by the fence`);
      }
      fence = outcome.fence;
    }
    return { ok: true, fence };
  }

  private async appendOne(org: string, subject: string, first: number, payload: Buffer, expected: Fence): Promise<AppendOutcome> {
    let ack: PubAck;
    try {
      ack = await this.js.publish(subject, payload, { msgID: `${org}:${first}`, expect: { lastSubjectSequence: expected } });
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence) return CONFLICT;
      throw error;
    }
    if (!ack.duplicate) return { ok: true, fence: ack.seq };
    const last = await this.jsm.streams.getMessage(this.names.stream, { last_by_subj: subject });
    const same = last !== null && last.seq === ack.seq && sameBatch(unpackBatch(last.data), unpackBatch(payload));
    return same ? { ok: true, fence: ack.seq } : CONFLICT;
  }

  /**
   * The org's batches from the one holding `fromSeq`, as `read` gives them, through an ordered
   * consumer filtered on the org's subject: fetched many at a time instead of one get per batch,
   * for a writer recovering a large org from the stream. A fetch that brings nothing in 2 s while
   * the org has more (a consumer placed on a server still catching up after a partition) hands
   * the rest over to `read`'s gets, which the stream leader answers.
   */
  async *readWhole(org: string, fromSeq: number): AsyncIterable<CommittedBatch> {
    const subject = ledgerSubject(this.names, org);
    const last = await this.jsm.streams.getMessage(this.names.stream, { last_by_subj: subject });
    if (last === null) return;
    const consumer = await this.js.consumers.get(this.names.stream, { filter_subjects: subject });
    let reached = 0;
    let next = fromSeq;
    try {
      while (reached < last.seq) {
        let got = 0;
        for await (const message of await consumer.fetch({ max_messages: WHOLE_FETCH, expires: WHOLE_FETCH_MS })) {
          got++;
          reached = message.seq;
          const batch = unpackBatch(message.data);
          if (batch.first + batch.rows.length > next) {
            const rows = decodeBatch(batch, next);
            next = rows[rows.length - 1]!.seq + 1;
            yield { org, rows, fence: message.seq };
          }
          if (reached >= last.seq) break;
        }
        if (got === 0) break;
      }
    } finally {
      await consumer.delete().catch(() => undefined);
    }
    if (reached < last.seq) yield* this.readAfter(org, next, reached);
  }

  fenceAfter(_rows: readonly LedgerRow[]): Fence {
    throw new Error('JetStreamLedgerLog cannot foretell a fence (no pipelined-appends): it is the stream sequence the ack returns');
  }

  /**
   * The org's batches from the one holding `fromSeq`, each with its stream sequence as fence. One
   * message get per batch, answered by the stream leader, so a read after an append sees it.
   */
  read(org: string, fromSeq: number): AsyncIterable<CommittedBatch> {
    return this.readAfter(org, fromSeq, 0);
  }

  /**
   * `read`, looking only at stream sequences after `streamSeq` (a sequence at or before the
   * org's batch holding `fromSeq`, such as the one before it): a replica filling a gap asks from
   * its last batch rather than from the start of the stream.
   */
  async *readAfter(org: string, fromSeq: number, streamSeq: number): AsyncIterable<CommittedBatch> {
    const subject = ledgerSubject(this.names, org);
    for (let seq = streamSeq + 1; ; ) {
      // The server has answered `next_by_subj` since 2.9; the client's MsgRequest type omits it.
      const query = { next_by_subj: subject, seq } as unknown as MsgRequest;
      const message = await this.jsm.streams.getMessage(this.names.stream, query);
      if (message === null) return;
      const batch = unpackBatch(message.data);
      seq = message.seq + 1;
      if (batch.first + batch.rows.length <= fromSeq) continue;
      yield { org, rows: decodeBatch(batch, fromSeq), fence: message.seq };
    }
  }

  /**
   * From the start of the stream, skipping batches the holder has whole. Tighter would need the
   * holder to keep a stream sequence below which it has applied everything (its replica's
   * watermark); per-org row seqs cannot name one, since an org the holder lacks may start anywhere.
   */
  positionAfter(held: ReadonlyMap<string, number>): Position {
    const position: JetStreamPosition = { adapter: 'jetstream', startSeq: 1, held: new Map(held) };
    return position;
  }

  async subscribe(handler: BatchHandler, from: Position): Promise<Subscription> {
    if (from.adapter !== 'jetstream') throw new Error(`JetStreamLedgerLog: a position of ${from.adapter} is not one of this log`);
    if (this.closed) throw new Error('JetStreamLedgerLog is closed');
    const live = await openLedgerFeed({
      js: this.js,
      jsm: this.jsm,
      stream: this.names.stream,
      from: from as JetStreamPosition,
      handler,
      log: this.options.log,
      onEnd: (s) => this.subscriptions.delete(s),
    });
    if (this.closed) {
      await live.stop(); // closed while its replay ran
      throw new Error('JetStreamLedgerLog is closed');
    }
    this.subscriptions.add(live);
    return { unsubscribe: () => void live.stop() };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    if (this.ownsConnection) await this.nc.drain();
  }
}
