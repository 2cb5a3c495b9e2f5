import type { LedgerRow } from '../domain/ledger.js';
import type { AppendOutcome, BatchHandler, CommittedBatch, Fence, LedgerCapability, LedgerLog, Position, Subscription } from '../bus/ledger-log.js';
import type { Logger } from '../log.js';
import type { LmdbLedger } from './lmdb-ledger.js';

const CHUNK = 1024;

/** LMDB's position: per org, the seq a subscriber holds (its replay starts after it). */
interface LmdbPosition extends Position {
  adapter: 'lmdb';
  after: ReadonlyMap<string, number>;
}

/** A live subscriber, and per org the seq its replay reached while appends were in flight. */
interface Subscriber {
  handler: BatchHandler;
  replayed: Map<string, number>;
}

/**
 * The ledger log of embedded mode, over the LMDB ledger table. The fence is the org's last seq,
 * checked inside the write transaction, so appends may be pipelined. Subscribers live in this
 * process: a committed batch is handed to each before its append resolves, in seq order per org.
 */
export class LmdbLedgerLog implements LedgerLog {
  readonly capabilities: readonly LedgerCapability[] = ['pipelined-appends', 'local-delivery'];
  private readonly subscribers = new Set<Subscriber>();
  /** Per org, the delivery of its last append: pipelined appends are delivered in order. */
  private readonly tails = new Map<string, Promise<void>>();

  constructor(
    private readonly ledger: LmdbLedger,
    private readonly log: Logger,
  ) {}

  append(org: string, rows: readonly LedgerRow[], expected: Fence): Promise<AppendOutcome> {
    const first = rows[0];
    if (first === undefined) return Promise.resolve({ ok: true, fence: expected });
    if (first.seq !== expected + 1) return Promise.resolve({ ok: false, reason: 'conflict' });
    const committed = this.ledger.commit(org, rows, expected);
    const delivered = (this.tails.get(org) ?? Promise.resolve()).then(async (): Promise<AppendOutcome> => {
      if (!(await committed)) return { ok: false, reason: 'conflict' };
      const batch: CommittedBatch = { org, rows, fence: this.fenceAfter(rows) };
      for (const subscriber of this.subscribers) {
        const replayed = subscriber.replayed.get(org);
        if (replayed === undefined) deliver(this.log, subscriber.handler, batch);
        else {
          // It joined while this batch was in flight: its replay may hold some of these rows.
          subscriber.replayed.delete(org);
          const newer = rows.filter((row) => row.seq > replayed);
          if (newer.length > 0) deliver(this.log, subscriber.handler, { org, rows: newer, fence: batch.fence });
        }
      }
      return { ok: true, fence: batch.fence };
    });
    const tail = delivered.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(org, tail);
    void tail.then(() => {
      if (this.tails.get(org) === tail) this.tails.delete(org);
    });
    return delivered;
  }

  together(run: () => void): void {
    this.ledger.together(run);
  }

  fenceAfter(rows: readonly LedgerRow[]): Fence {
    return rows[rows.length - 1]?.seq ?? 0;
  }

  // eslint-disable-next-line @typescript-eslint/require-await -- LMDB reads synchronously; the port is async for remote logs
  async *read(org: string, fromSeq: number): AsyncIterable<CommittedBatch> {
    for (const rows of chunked(this.ledger.range(org, fromSeq))) yield { org, rows, fence: this.fenceAfter(rows) };
  }

  positionAfter(held: ReadonlyMap<string, number>): Position {
    const position: LmdbPosition = { adapter: 'lmdb', after: new Map(held) };
    return position;
  }

  subscribe(handler: BatchHandler, from: Position): Promise<Subscription> {
    if (from.adapter !== 'lmdb') return Promise.reject(new Error(`LmdbLedgerLog: a position of ${from.adapter} is not one of this log`));
    const after = (from as LmdbPosition).after;
    const subscriber: Subscriber = { handler, replayed: new Map() };
    // The replay reads LMDB synchronously, so no append can interleave: no gap. A batch committed
    // but not yet delivered is in the replay already; its delivery skips what the replay gave.
    for (const org of this.ledger.orgs()) {
      let last = after.get(org) ?? 0;
      for (const rows of chunked(this.ledger.range(org, last + 1))) {
        deliver(this.log, handler, { org, rows, fence: this.fenceAfter(rows) });
        last = rows[rows.length - 1]!.seq;
      }
      if (this.tails.has(org)) subscriber.replayed.set(org, last);
    }
    this.subscribers.add(subscriber);
    return Promise.resolve({ unsubscribe: () => this.subscribers.delete(subscriber) });
  }

  close(): Promise<void> {
    this.subscribers.clear();
    return Promise.resolve();
  }
}

/** A failing subscriber must not fail an append that is already durable. */
function deliver(log: Logger, handler: BatchHandler, batch: CommittedBatch): void {
  try {
    handler(batch);
  } catch (error) {
    log.error({ org: batch.org, err: error }, 'subscriber failed');
  }
}

/** Rows in chunks of CHUNK, read lazily. */
function* chunked(rows: Iterable<LedgerRow>): Iterable<LedgerRow[]> {
  let chunk: LedgerRow[] = [];
  for (const row of rows) {
    chunk.push(row);
    if (chunk.length === CHUNK) {
      yield chunk;
      chunk = [];
    }
  }
  if (chunk.length > 0) yield chunk;
}
