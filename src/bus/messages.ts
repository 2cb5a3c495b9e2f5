import type { IngestEventBody, RegisterAgentBody, ReviewDecisionBody, UpdateAgentBody } from '../domain/schemas.js';
import type { AgentView, ExportRecordBody, ExportResult, IngestResult, Refusal } from '../domain/org-state.js';
import type { ReviewResult } from '../domain/org-reviews.js';
import type { DeliveryRecord } from '../store/webhook-store.js';

export type { AgentView, ExportResult, IngestResult, Refusal, ReviewResult };

/** Commands to an org's single writer. Tagged on `type`; every command names its org. */
export type LedgerCommand =
  | { type: 'agent.register'; org: string; agent: RegisterAgentBody }
  | { type: 'agent.update'; org: string; agentId: string; changes: UpdateAgentBody }
  /** `receipt`: the reply carries the event's place in the log (`entry`), for a signed receipt. */
  | { type: 'event.ingest'; org: string; event: IngestEventBody; receipt?: boolean }
  | { type: 'review.decide'; org: string; actionId: number; decision: ReviewDecisionBody; reviewer: string }
  | { type: 'export.record'; org: string; export: ExportRecordBody };

/**
 * Several events of one org in one command (a slice of a stream frame or of a batch request): one
 * request and one reply for all of them, each event still decided alone, in order (`event.ingest`
 * each, as the writer queues them). The reply's value has an outcome per event.
 */
export interface EventsIngestCommand {
  type: 'events.ingest';
  org: string;
  events: IngestEventBody[];
  receipt?: boolean;
}

/** One event's outcome in an `events.ingest` reply: as the reply to its `event.ingest` would be. */
export type EventReply = { ok: true; value: IngestResult; entry?: LogEntry } | Refusal;

/** Re-queues a dead webhook delivery: taken by the delivery actor of the node that sends the org's deliveries. */
export interface DeliveryRetryCommand {
  type: 'delivery.retry';
  org: string;
  webhookId: number;
  deliveryId: number;
}

/**
 * A read sent to the org's owner, which answers it from its own copy (cluster mode; see
 * KeyedReads): a keyed GET, whose key travels as its id and digest (never its secret), or a
 * public read of the org's log (tiles, consistency proofs), which has no key.
 */
export interface ReadForwardCommand {
  type: 'read.forward';
  org: string;
  /** The route's path pattern, as mounted. */
  path: string;
  params: Record<string, string>;
  /** The query string, without '?'. */
  query: string;
  headers: Record<string, string>;
  url: string;
  /** Absent: a public log read, answered only by a route mounted for one (Route.owner). */
  key?: { id: string; hash: string };
}

/** A forwarded read's answer, as the owner wrote it; or word that it is too large to carry. */
export type ForwardedAnswer =
  | {
      status: number;
      contentType: string;
      headers: Record<string, string>;
      body: string;
      /** The body is bytes, base64-encoded. */
      base64?: true;
    }
  | { tooLarge: true };

/** What an org's writer takes: ledger commands, one at a time or events several at once. */
export type WriterCommand = LedgerCommand | EventsIngestCommand;

/** Every command routed to an org's owner. */
export type OrgCommand = WriterCommand | DeliveryRetryCommand | ReadForwardCommand;

interface ResultOf {
  'agent.register': AgentView;
  'agent.update': AgentView;
  'event.ingest': IngestResult;
  'events.ingest': EventReply[];
  'review.decide': ReviewResult;
  'export.record': ExportResult;
  'delivery.retry': DeliveryRecord;
  'read.forward': ForwardedAnswer;
}

/** Where a record sits in its org's log (DESIGN §10): what a receipt signs, less the origin. */
export interface LogEntry {
  seq: number;
  recorded_at: string;
  /** Hex. */
  leaf_hash: string;
}

export type ReplyTo<C extends OrgCommand> = { ok: true; value: ResultOf[C['type']]; entry?: LogEntry } | Refusal;
export type OrgReply = ReplyTo<OrgCommand>;

/**
 * A handler's answer to a command of an org it no longer owns: nothing was decided. The command
 * router routes the command again; callers never see it.
 */
export interface NotOwner {
  ok: false;
  code: 'not_owner';
  message: string;
}
