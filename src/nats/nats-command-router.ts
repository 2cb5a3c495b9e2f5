import { Expiring } from '../bus/expiring.js';
import { VigilError } from '../errors.js';
import { within } from '../time-bound.js';
import { connect, createInbox, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { DEFAULT_DEADLINE_MS, type CommandHandler, type CommandRouter, type RequestOptions, type RouterCapability, type ServeOptions, type Serving } from '../bus/command-router.js';
import type { OrgCommand, ReplyTo } from '../bus/messages.js';
import type { Logger } from '../log.js';
import { CommandServer } from './command-server.js';
import { decodeAnswer, encodeRequest, unpackFrames, type WireAnswer } from './command-wire.js';
import { RequestPacker } from './request-packer.js';
import { Mailbox, type Signal } from './mailbox.js';
import { DEFAULT_PARTITIONS, partitionOf } from './partition.js';

export interface NatsCommandRouterOptions {
  /** Orgs hash to this many partitions (DESIGN §8: VIGIL_PARTITIONS, fixed for the cluster). Default 64. */
  partitions?: number;
  /** Commands go to `<prefix>.<partition>`. Default `vigil.cmd`; tests pass their own. */
  prefix?: string;
  log?: Logger;
  now?: () => number;
}

/** Timings of the protocol; defaults suit a LAN, tests may shorten them. */
export interface NatsCommandRouterTimings {
  /** A request not yet taken by an owner is sent again this often (an owner may have appeared). */
  resendMs: number;
  /** After "no responders" or `not_owner`, a request is routed again after this pause. */
  retryMs: number;
  /** An owner deciding a command says so this often; silent for three of these, it is presumed lost. */
  heartbeatMs: number;
  /** An owner takes a command only with this long left before its deadline (see CommandServer). */
  acceptMarginMs: number;
  /**
   * A request is answered by its deadline plus this, whatever its owner is doing: past it, 503
   * with the outcome unknown if the owner had taken it (its batch may still be being written).
   */
  answerGraceMs: number;
}

export const DEFAULT_TIMINGS: NatsCommandRouterTimings = { resendMs: 100, retryMs: 25, heartbeatMs: 500, acceptMarginMs: 50, answerGraceMs: 1000 };

/**
 * The owner that took a command fell silent before answering: it may or may not have decided it.
 * HTTP 503 `unavailable` with Retry-After, saying the outcome is unknown (a retry may record the
 * event twice; idempotency keys, DESIGN §9, will settle it).
 */
export class OwnerLostError extends VigilError {
  override readonly name = 'OwnerLostError';
  constructor(org: string) {
    super('unavailable', `the writer of org ${org} took the command and then went silent: it may or may not have been recorded`, undefined, { retryAfterSeconds: 1 });
  }
}

type Outcome<C extends OrgCommand> = { kind: 'reply'; reply: ReplyTo<C> } | { kind: 'again' } | { kind: 'late' };

/**
 * The command router of cluster mode (DESIGN §8), over core NATS request-reply. An org's commands
 * go to `<prefix>.<partition>`; every serving node listens to all partitions and the owner alone
 * answers (see CommandServer). A request of an org this router's own node owns is handed to its
 * writer directly, as in-process (`first`); any other request:
 *
 * 1. is published with a reply subject of this router's inbox, and re-sent every `resendMs` until
 *    an owner answers `accepted` (a node that does not own the org stays silent; an owner may
 *    appear, by lease, at any time). An owner takes a re-sent request once.
 * 2. "No responders" (nobody serves) or a `not_owner` reply: routed again after `retryMs`, under a
 *    fresh reply subject. `not_owner` never reaches the caller.
 * 3. Not accepted by the deadline: `unavailable`, and nothing was decided (an owner takes nothing
 *    within `acceptMarginMs` of the deadline, so its `accepted` is not in flight then).
 * 4. Accepted: the owner decides it only if its writer reaches it before the deadline (a command
 *    past it is refused unrecorded, see Expiring); the requester waits for the reply while the
 *    owner's heartbeats come, and rejects with OwnerLostError after three missed ones (the owner
 *    died, or its event loop stalled that long: the outcome is unknown). A handler that threw is a
 *    rejection too. Whatever happens, `request` answers by the deadline plus `answerGraceMs`:
 *    past it, 503 saying the outcome is unknown (a batch being written may still land). A
 *    caller found gone (`abandoned`) at a heartbeat is told to the owner by sending the request
 *    again, flagged; the owner's handler sees the flag set and refuses the command if undecided.
 *
 * Packing: the requests (and re-sends) of one turn of the event loop to one partition leave as one
 * NATS message, each under its own reply subject, and the owner packs its answers to this router
 * per turn (`<inbox>.batch`); a lone request goes plain. Under load that is one message per
 * partition per turn instead of three per command (request, accepted, reply) through the servers.
 *
 * Order: commands of one caller (one router) for one org are published in order on one connection,
 * and NATS delivers them to a subscriber in that order, so a steady owner handles them as sent.
 * Once a request of an org has to wait (silence, no responders, not_owner), it lets the org's
 * earlier requests be answered first, and requests made while it waits queue until it is answered,
 * then go together, in order (see `request`). Weaker than in-process: silence is known only
 * after `resendMs`, so if an owner appears within that time after an earlier request met silence,
 * a later request sent meanwhile may be decided before it. Keeping order there would mean waiting
 * for each `accepted` before the next send, one round trip per command of an org.
 *
 * Connection: `open` borrows one (`close` stops only what this router started), `connect` owns one
 * and drains it on `close`.
 */
export class NatsCommandRouter implements CommandRouter {
  readonly capabilities: readonly RouterCapability[] = ['many-owners'];
  private readonly prefix: string;
  private readonly partitions: number;
  private readonly now: () => number;
  private readonly timings: NatsCommandRouterTimings;
  private readonly server: CommandServer;
  private readonly inbox = createInbox();
  private readonly inboxSubscription: Subscription;
  private readonly mailboxes = new Map<string, Mailbox>();
  /** Requests sent in one turn of the event loop, one NATS message per partition subject (or a few, within max_payload). */
  private readonly packer: RequestPacker;
  private next = 0;
  private forwardedCount = 0;
  /**
   * Per org with requests unanswered: when all of them are answered, the requests made so far,
   * and the gate later requests queue at while one waits (with the latest waiting one's ticket).
   */
  private readonly orgs = new Map<string, { sent: Promise<unknown>; tickets: number; gate: Promise<void> | null; gateTicket: number }>();
  private closed = false;

  private constructor(
    private readonly nc: NatsConnection,
    options: NatsCommandRouterOptions,
    timings: Partial<NatsCommandRouterTimings>,
    private readonly ownsConnection: boolean,
  ) {
    this.prefix = options.prefix ?? 'vigil.cmd';
    this.partitions = options.partitions ?? DEFAULT_PARTITIONS;
    partitionOf('', this.partitions); // validates the count
    this.now = options.now ?? Date.now;
    this.packer = new RequestPacker(nc, this.inbox, this.now, options.log);
    this.timings = { ...DEFAULT_TIMINGS, ...timings };
    this.server = new CommandServer(nc, { prefix: this.prefix, heartbeatMs: this.timings.heartbeatMs, acceptMarginMs: this.timings.acceptMarginMs, now: this.now, log: options.log });
    this.inboxSubscription = nc.subscribe(`${this.inbox}.*`, { callback: (error, msg) => (error === null ? this.deliver(msg) : undefined) });
  }

  /** A router over a connection the caller keeps (and closes after this router). */
  static open(nc: NatsConnection, options: NatsCommandRouterOptions = {}, timings: Partial<NatsCommandRouterTimings> = {}): NatsCommandRouter {
    return new NatsCommandRouter(nc, options, timings, false);
  }

  /** A router with its own connection to `servers`, drained and closed with it. */
  static async connect(servers: string[], options: NatsCommandRouterOptions = {}, timings: Partial<NatsCommandRouterTimings> = {}): Promise<NatsCommandRouter> {
    const nc = await connect({ servers, maxReconnectAttempts: -1 });
    return new NatsCommandRouter(nc, options, timings, true);
  }

  /**
   * Requests this router sent to another node since it opened (one per command, not per NATS
   * message or re-send), counted as they leave: what owner-aware clients save (`/metrics`).
   */
  get forwarded(): number {
    return this.forwardedCount;
  }

  subjectOf(org: string): string {
    return `${this.prefix}.${partitionOf(org, this.partitions)}`;
  }

  serve(handler: CommandHandler, options: ServeOptions): Serving {
    if (this.closed) throw new Error('NatsCommandRouter is closed');
    return { stop: this.server.add(handler, options) };
  }

  /**
   * Each request notes the requests of its org sent before it and still unanswered. The common
   * case, nothing of the org waiting: decided at once by this node's own writer if it owns the org,
   * else sent. A request that turns out to wait (no owner, not_owner) first lets those earlier ones
   * be answered, and closes the org's gate until it is answered itself: requests made meanwhile
   * queue at the gate and go, in order, once it opens, so order is kept whichever request learns
   * first that it must wait, and the org is back to sending at once as soon as the waiting is over.
   */
  request<C extends OrgCommand>(command: C, options: RequestOptions = {}): Promise<ReplyTo<C>> {
    const deadline = options.deadline ?? this.now() + DEFAULT_DEADLINE_MS;
    const org = command.org;
    if (this.closed) return Promise.resolve(noOwner(org));
    let state = this.orgs.get(org);
    if (state === undefined) {
      state = { sent: Promise.resolve(), tickets: 0, gate: null, gateTicket: 0 };
      this.orgs.set(org, state);
    }
    const entry = state;
    const ticket = ++entry.tickets;
    const before = entry.sent;
    let answered = (): void => {};
    const sent = Promise.all([before, new Promise<void>((resolve) => (answered = resolve))]);
    entry.sent = sent;
    let waiting = false;
    const waits = (): Promise<unknown> => {
      if (!waiting && ticket > entry.gateTicket) {
        // Later requests queue until this one (and so every one before it) is answered.
        const gate = sent.then(() => {
          if (entry.gate === gate) entry.gate = null;
        });
        entry.gate = gate;
        entry.gateTicket = ticket;
      }
      waiting = true;
      return before;
    };
    const gate = entry.gate;
    const decided = gate !== null ? gate.then(() => this.first(command, options, deadline, waits)) : this.first(command, options, deadline, waits);
    const reply = this.answeredBy(decided, org, deadline + this.timings.answerGraceMs, command.type === 'read.forward');
    const settle = (): void => {
      answered();
      void sent.then(() => {
        if (this.orgs.get(org)?.sent === sent) this.orgs.delete(org);
      });
    };
    void reply.then(settle, settle);
    return reply;
  }

  /**
   * A request's first try: this node's own writer when it owns the org (no round trip over NATS),
   * else the owner over NATS. A local `not_owner` (the lease just moved) waits and routes.
   */
  private first<C extends OrgCommand>(command: C, options: RequestOptions, deadline: number, waits: () => Promise<unknown>): Promise<ReplyTo<C>> {
    // Queued behind an earlier request of the org past the deadline: never sent, never decided.
    if (this.now() > deadline) return Promise.resolve(noOwner(command.org));
    const local = this.server.ownerOf(command.org);
    if (local === undefined) {
      this.forwardedCount++;
      return this.route(command, options, deadline, waits);
    }
    return local(command, { deadline, abandoned: new Expiring(deadline, this.now, options.abandoned) }).then((reply) => {
      if (reply.ok || reply.code !== 'not_owner') return reply as ReplyTo<C>;
      this.forwardedCount++;
      return waits().then(() => this.route(command, options, deadline, waits));
    });
  }

  /**
   * The reply, or by `by` (the deadline and its grace), 503 with the outcome unknown: the command
   * is decided only if its writer launched it before the deadline (a writer refuses, unrecorded,
   * a command past it), and a batch being written then may still land.
   */
  private answeredBy<C extends OrgCommand>(decided: Promise<ReplyTo<C>>, org: string, by: number, read: boolean): Promise<ReplyTo<C>> {
    return within(decided, by - this.now(), () => (read ? readTimedOut<C>(org) : unknownOutcome<C>(org)));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.server.close();
    for (const mailbox of this.mailboxes.values()) mailbox.push({ t: 'closed' });
    this.inboxSubscription.unsubscribe();
    if (this.ownsConnection) await this.nc.drain();
  }

  /** Routes until an owner answers, the owner is lost, or the deadline passes unaccepted. */
  private async route<C extends OrgCommand>(command: C, options: RequestOptions, deadline: number, waits: () => Promise<unknown>): Promise<ReplyTo<C>> {
    for (;;) {
      if (this.closed) return noOwner(command.org);
      const outcome = await this.attempt(command, options, deadline, waits);
      if (outcome.kind === 'reply') return outcome.reply;
      if (outcome.kind === 'late') return noOwner(command.org);
      await waits();
      const left = deadline - this.now();
      if (left <= 0) return noOwner(command.org);
      await new Promise((resolve) => setTimeout(resolve, Math.min(left, this.timings.retryMs)));
    }
  }

  /** One reply subject: sent (and re-sent on silence) until taken, then waits for the owner's answer. */
  private async attempt<C extends OrgCommand>(command: C, options: RequestOptions, deadline: number, waits: () => Promise<unknown>): Promise<Outcome<C>> {
    const reply = `${this.inbox}.${++this.next}`;
    const mailbox = new Mailbox();
    this.mailboxes.set(reply, mailbox);
    const subject = this.subjectOf(command.org);
    const send = (): void => this.packer.add(subject, reply, encodeRequest({ command, deadline, abandoned: options.abandoned?.aborted === true }));
    try {
      send();
      let accepted = false;
      let told = options.abandoned?.aborted === true;
      for (;;) {
        // Signals already here are read even past the deadline: an `accepted` among them binds.
        const left = Math.max(0, deadline - this.now());
        const signal = await mailbox.next(accepted ? 3 * this.timings.heartbeatMs : Math.min(left, this.timings.resendMs));
        const outcome = this.read<C>(signal, accepted, command.org, command.type === 'read.forward');
        if (outcome !== null) return outcome;
        // Answered by request() already (unknown outcome): stop listening for an owner still deciding.
        if (accepted && this.now() > deadline + this.timings.answerGraceMs) return { kind: 'late' };
        if (signal.t === 'silence' && !accepted) {
          if (deadline - this.now() <= 0) return { kind: 'late' };
          await waits(); // earlier waiting requests of the org are taken first
          if (this.closed) return { kind: 'late' };
          send();
        }
        if (signal.t === 'accepted' || signal.t === 'working') {
          accepted = true;
          if (options.abandoned?.aborted === true && !told) {
            told = true; // the caller is gone: the request again, flagged, tells the owner
            send();
          }
        }
      }
    } finally {
      this.mailboxes.delete(reply);
    }
  }

  /** What a signal ends the attempt with, or null if it goes on. */
  private read<C extends OrgCommand>(signal: Signal, accepted: boolean, org: string, isRead: boolean): Outcome<C> | null {
    switch (signal.t) {
      case 'reply':
        return signal.reply.ok || signal.reply.code !== 'not_owner' ? { kind: 'reply', reply: signal.reply as ReplyTo<C> } : { kind: 'again' };
      case 'error':
        // The owner's handler threw: a VigilError is thrown here as it was there (a 503 stays a 503).
        throw signal.code === undefined ? new Error(signal.message) : new VigilError(signal.code, signal.message, undefined, { retryAfterSeconds: signal.retryAfterSeconds });
      case 'no_responders':
        return accepted ? null : { kind: 'again' };
      case 'closed':
        if (accepted) throw new Error(`NatsCommandRouter closed while the writer of org ${org} decided a command; it may have been recorded`);
        return { kind: 'late' };
      case 'silence':
        if (accepted) throw isRead ? new VigilError('unavailable', `the owner of org ${org} went silent while answering the read; retry`, undefined, { retryAfterSeconds: 1 }) : new OwnerLostError(org);
        return null;
      default:
        return null;
    }
  }

  private deliver(msg: Msg): void {
    if (msg.subject === `${this.inbox}.batch`) {
      for (const [reply, data] of unpackFrames(msg.data) ?? []) this.answer(reply, data);
      return;
    }
    if (msg.data.length === 0 && msg.headers?.code === 503) {
      for (const reply of this.packer.membersOf(msg.subject)) this.mailboxes.get(reply)?.push({ t: 'no_responders' });
      return;
    }
    this.answer(msg.subject, msg.data);
  }

  private answer(reply: string, data: Uint8Array): void {
    const mailbox = this.mailboxes.get(reply);
    if (mailbox === undefined) return;
    const answer: WireAnswer | null = decodeAnswer(data);
    if (answer !== null) mailbox.push(answer);
  }
}

function unknownOutcome<C extends OrgCommand>(org: string): ReplyTo<C> {
  return {
    ok: false,
    code: 'unavailable',
    message: `the writer of org ${org} did not answer by the deadline: if it was writing the command then, it may have been recorded; retry with the same Idempotency-Key`,
  };
}

/** A forwarded read the owner did not answer in time: a read records nothing, so a retry is all. */
function readTimedOut<C extends OrgCommand>(org: string): ReplyTo<C> {
  return { ok: false, code: 'unavailable', message: `the owner of org ${org} did not answer the read by its deadline; retry` };
}

function noOwner<C extends OrgCommand>(org: string): ReplyTo<C> {
  return { ok: false, code: 'unavailable', message: `no writer of org ${org} answered in time; nothing was recorded, retry` };
}
