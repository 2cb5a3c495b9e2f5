import type { LedgerRow } from '../domain/ledger.js';
import type { AppendOptions, AppendOutcome } from '../store/ledger-store.js';
import type { OrgCommand, OrgReply, ReplyTo } from './messages.js';

export type CommandHandler = (command: OrgCommand, options?: RequestOptions) => Promise<OrgReply>;

export interface RequestOptions {
  /**
   * The caller's connection. A command whose caller is gone (`aborted`) before the writer decides
   * it is refused unrecorded: nobody would learn its outcome, and a client that retries must not
   * find it recorded twice. Once decided, it is recorded whatever happens to the caller.
   */
  abandoned?: { readonly aborted: boolean };
}
/**
 * Takes committed rows. A live subscriber may return a promise for what it stores because of them
 * (e.g. webhook deliveries): the append resolves only after it settles, so that is stored before
 * the writer answers.
 */
export type CommittedHandler = (org: string, rows: readonly LedgerRow[]) => void | Promise<unknown>;
/** A subscriber that folds rows into memory and stores nothing: it returns nothing to wait for. */
export type ProjectionHandler = (org: string, rows: readonly LedgerRow[]) => void;

/**
 * The bus joins the front end, the org writers and the projections.
 *
 * Commands: `request` delivers a command to the one handler that owns the command's org and
 * resolves with its reply. Commands from one caller for one org are handled in the order sent.
 *
 * Ledger log: `append` is the org writer's durable append. It is conditional on `expectedLastSeq`
 * being the org's last seq (a stale or second writer gets `conflict` and nothing is written), and
 * resolves only once the rows are durable and every subscriber has taken them (and settled the
 * promise it returned, if any).
 *
 * Subscriptions: a subscriber first receives every row already committed, then live rows; per
 * org, rows arrive in seq order, each exactly once, never before they are durable.
 */
export interface Bus {
  serve(handler: CommandHandler): void;
  request<C extends OrgCommand>(command: C, options?: RequestOptions): Promise<ReplyTo<C>>;
  append(org: string, rows: readonly LedgerRow[], expectedLastSeq: number, options?: AppendOptions): Promise<AppendOutcome>;
  /** One org's committed rows from `fromSeq`, in order, in chunks. */
  read(org: string, fromSeq: number): AsyncIterable<readonly LedgerRow[]>;
  /**
   * Resolves once the replay of already committed rows has been delivered. `after` names, per
   * org, the seq a subscriber already holds (from its own checkpoint): replay starts after it.
   */
  subscribe(handler: CommittedHandler, options?: SubscribeOptions): Promise<Subscription>;
  close(): Promise<void>;
}

export interface SubscribeOptions {
  after?: ReadonlyMap<string, number>;
}

export interface Subscription {
  unsubscribe(): void;
}
