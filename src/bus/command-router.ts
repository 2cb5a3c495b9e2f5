import type { NotOwner, OrgCommand, OrgReply, ReplyTo } from './messages.js';

/** Decides one command of an org this node owns. */
export type CommandHandler = (command: OrgCommand, options?: RequestOptions) => Promise<OrgReply | NotOwner>;

export interface RequestOptions {
  /**
   * Milliseconds since the epoch by which the command must have reached its org's owner; past it
   * the request is refused `unavailable` (HTTP 503 with Retry-After). Five seconds from now by default.
   */
  deadline?: number;
  /**
   * The caller's connection. A command whose caller is gone (`aborted`) before the writer decides
   * it is refused unrecorded: nobody would learn its outcome, and a client that retries must not
   * find it recorded twice. Once decided, it is recorded whatever happens to the caller.
   */
  abandoned?: { readonly aborted: boolean };
}

export interface ServeOptions {
  /** Whether this node owns `org` now (embedded: every org; cluster: the partitions it leases). */
  owns: (org: string) => boolean;
}

export interface Serving {
  /** Stops taking commands; requests then go to another owner or wait for one. */
  stop(): void;
}

/** What a router adapter can do beyond the contract; the contract suite runs the matching cases. */
export type RouterCapability =
  /** Several handlers may serve at once, each owning some orgs (nodes of a cluster, or a test). */
  'many-owners';

/**
 * Carries commands from the front end to the single writer of their org.
 *
 * - `request` delivers the command to the one handler that owns its org and resolves with its reply.
 *   Commands of one caller for one org are handled in the order sent.
 * - No owner until the deadline: the reply is an `unavailable` refusal, and nothing was decided.
 * - A handler that lost the org after the command was routed to it answers `not_owner` without
 *   deciding anything; the router then routes the command again, until the deadline. `not_owner`
 *   never reaches the caller.
 * - A handler's reply is passed on as it is; a handler that throws is the caller's rejection.
 */
export interface CommandRouter {
  readonly capabilities: readonly RouterCapability[];
  serve(handler: CommandHandler, options: ServeOptions): Serving;
  request<C extends OrgCommand>(command: C, options?: RequestOptions): Promise<ReplyTo<C>>;
  close(): Promise<void>;
}

/** How long a request waits for an owner unless it says otherwise. */
export const DEFAULT_DEADLINE_MS = 5_000;
