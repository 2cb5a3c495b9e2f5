import type { LedgerRow } from '../domain/ledger.js';
import type { AppendOptions, AppendOutcome, LedgerStore } from '../store/ledger-store.js';
import type { Bus, CommandHandler, CommittedHandler, RequestOptions, SubscribeOptions, Subscription } from './bus.js';
import type { OrgCommand, ReplyTo } from './messages.js';
import type { Logger } from '../log.js';

const CHUNK = 1024;

/**
 * In-process bus for embedded mode. The expected-last-seq fence is checked by the store inside
 * the write transaction, so appends may be pipelined. Commands are direct calls; the ledger log is the LMDB
 * ledger table, so a late subscriber replays from it before it sees live rows.
 */
export class MemoryBus implements Bus {
  private handler: CommandHandler | null = null;
  private readonly subscribers = new Set<CommittedHandler>();
  private readonly tails = new Map<string, Promise<void>>();

  constructor(
    private readonly log: LedgerStore,
    private readonly logger: Logger,
  ) {}

  serve(handler: CommandHandler): void {
    if (this.handler !== null) throw new Error('MemoryBus: a command handler is already serving');
    this.handler = handler;
  }

  request<C extends OrgCommand>(command: C, options?: RequestOptions): Promise<ReplyTo<C>> {
    if (this.handler === null) {
      return Promise.resolve({ ok: false, code: 'unavailable', message: 'no writer is serving commands' });
    }
    return this.handler(command, options) as Promise<ReplyTo<C>>;
  }

  async append(org: string, rows: readonly LedgerRow[], expectedLastSeq: number, options?: AppendOptions): Promise<AppendOutcome> {
    const first = rows[0];
    if (first === undefined || first.seq !== expectedLastSeq + 1) {
      options?.onCommitted?.(first === undefined);
      return first === undefined ? { ok: true } : { ok: false, reason: 'conflict' };
    }
    // Pipelined appends of one org settle in order; delivery is chained so it is in order too.
    const appended = this.log.append(org, rows, expectedLastSeq, options);
    const previous = this.tails.get(org) ?? Promise.resolve();
    const delivered = previous.then(async () => {
      const outcome = await appended;
      if (!outcome.ok) return outcome;
      let stored: Promise<unknown>[] | null = null;
      for (const subscriber of this.subscribers) {
        const pending = deliver(this.logger, subscriber, org, rows);
        if (pending !== undefined) (stored ??= []).push(pending);
      }
      if (stored !== null) await Promise.all(stored);
      return outcome;
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

  async *read(org: string, fromSeq: number): AsyncIterable<readonly LedgerRow[]> {
    yield* chunked(this.log.range(org, fromSeq));
  }

  subscribe(handler: CommittedHandler, options: SubscribeOptions = {}): Promise<Subscription> {
    // The replay reads LMDB synchronously, so no append can interleave: no gap, no duplicate.
    for (const org of this.log.orgs()) {
      for (const chunk of chunked(this.log.range(org, (options.after?.get(org) ?? 0) + 1))) void deliver(this.logger, handler, org, chunk);
    }
    this.subscribers.add(handler);
    return Promise.resolve({ unsubscribe: () => this.subscribers.delete(handler) });
  }

  close(): Promise<void> {
    this.subscribers.clear();
    this.handler = null;
    return Promise.resolve();
  }
}

/** A failing subscriber must not fail an append that is already durable. */
function deliver(logger: Logger, handler: CommittedHandler, org: string, rows: readonly LedgerRow[]): Promise<unknown> | undefined {
  const failed = (error: unknown): void => {
    logger.error({ org, error: String(error) }, 'subscriber failed');
  };
  try {
    return handler(org, rows)?.catch(failed);
  } catch (error) {
    failed(error);
    return undefined;
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
