import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type { CommandHandler, ServeOptions } from '../bus/command-router.js';
import { Expiring } from '../bus/expiring.js';
import { VigilError } from '../errors.js';
import type { Logger } from '../log.js';
import { Coalescer, type Keyed } from './coalescer.js';
import { decodeRequest, encodeAnswer, isPack, packFrames, packLimit, packRuns, requestOrg, unpackFrames, type WireAnswer } from './command-wire.js';

interface Served {
  handler: CommandHandler;
  owns: (org: string) => boolean;
}

/** A command this node took, keyed by its reply subject (unique per request and attempt). */
interface Taken {
  deadline: number;
  /** Passed to the handler: the requester says its caller is gone, or the deadline passed (never decided then). */
  abandoned: Expiring;
  /** The encoded final answer once the handler settled, sent again to a re-sent request. */
  answer: Uint8Array | null;
  /** The request came in a pack: its requester reads packed answers. */
  packed: boolean;
}

export interface CommandServerOptions {
  /** Subject prefix; commands come on `<prefix>.<partition>`. */
  prefix: string;
  /** How often an owner tells requesters it is still deciding their commands. */
  heartbeatMs: number;
  /**
   * An owner takes a command only with at least this long left before its deadline, so its
   * `accepted` reaches the requester before the requester gives up and answers `unavailable`.
   */
  acceptMarginMs: number;
  now: () => number;
  log?: Logger;
}

const ACCEPTED = encodeAnswer({ t: 'accepted' });
const WORKING = encodeAnswer({ t: 'working' });
/** Marks a coalescer destination that is a requester's inbox taking packed answers (no subject starts so). */
const PACKED = ' ';


/**
 * The serving side of NatsCommandRouter: while any handler serves, one subscription to
 * `<prefix>.*` in no queue group, so every serving node sees every command and only the one
 * whose `owns(org)` holds answers; the others stay silent. Ownership is a per-org predicate that
 * changes (leases), and answering from the predicate at delivery time needs no (un)subscribing
 * in step with it; the cost is that each command reaches every serving node (N small), which
 * reads only the org in its frame.
 *
 * Handlers are called synchronously in delivery order, so commands published in order on one
 * connection reach the handler in that order. A re-sent request (same reply subject) is taken
 * once: it gets `accepted` again, or the final answer if there is one; a re-send saying the caller
 * is gone marks the command abandoned for the handler, which refuses it if not yet decided.
 */
export class CommandServer {
  private served: Served[] = [];
  private subscription: Subscription | null = null;
  private readonly taken = new Map<string, Taken>();
  private heartbeat: ReturnType<typeof setInterval> | null = null;
  /** Answers sent at once: `accepted`, and answers to re-sent requests. */
  private readonly now = new Coalescer((inbox, entries) => this.answer(inbox, entries), false);
  /** Answers sent at the end of the turn: replies and heartbeats, packed per requester. */
  private readonly later = new Coalescer((inbox, entries) => this.answer(inbox, entries));

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: CommandServerOptions,
  ) {}

  add(handler: CommandHandler, options: ServeOptions): () => void {
    const entry: Served = { handler, owns: options.owns };
    this.served.push(entry);
    if (this.subscription === null) {
      this.subscription = this.nc.subscribe(`${this.options.prefix}.*`, { callback: (error, msg) => (error === null ? this.take(msg) : undefined) });
    }
    if (this.heartbeat === null) {
      this.heartbeat = setInterval(() => this.beat(), this.options.heartbeatMs);
      this.heartbeat.unref();
    }
    return () => {
      this.served = this.served.filter((s) => s !== entry);
      // With no handler left, requests meet "no responders" at once instead of silence.
      if (this.served.length === 0) this.stop();
    };
  }

  /** The handler serving `org` on this node now, if any (the router's own node decides its orgs without a round trip). */
  ownerOf(org: string): CommandHandler | undefined {
    return this.served.find((s) => s.owns(org))?.handler;
  }

  /** Stops taking commands; commands already taken still get their answers. */
  stop(): void {
    this.served = [];
    this.subscription?.unsubscribe();
    this.subscription = null;
  }

  /**
   * A message holds one request (its reply subject the key) or a pack of them from one requester.
   * Every `accepted` of the message goes out before any of its commands reaches a handler.
   */
  private take(msg: Msg): void {
    const packed = isPack(msg.data);
    const entries: Keyed[] | null = packed ? unpackFrames(msg.data) : msg.reply ? [[msg.reply, msg.data]] : [];
    if (entries === null) {
      this.options.log?.warn({ subject: msg.subject }, 'command router: an undecodable pack of commands was dropped');
      return;
    }
    const starts: Array<() => void> = [];
    for (const [reply, frame] of entries) {
      const start = this.takeOne(reply, frame, packed);
      if (start !== null) starts.push(start);
    }
    // At once, before the handler can append anything of the commands: it goes out on this
    // connection ahead of the batch that records them, so a requester that never heard it knows
    // its command was not recorded and may send it again (to the next owner).
    this.now.flush();
    for (const start of starts) start();
  }

  /** Takes one request: answers a re-send, or notes a command of an owned org and returns what starts deciding it. */
  private takeOne(reply: string, frame: Uint8Array, packed: boolean): (() => void) | null {
    if (reply === '') return null;
    const known = this.taken.get(reply);
    if (known !== undefined) {
      // The same request again: a re-send, or the requester telling that its caller is gone.
      if (decodeRequest(frame)?.abandoned === true) known.abandoned.gone();
      this.queue(this.now, reply, known.answer ?? ACCEPTED, known.packed);
      return null;
    }
    // Every serving node sees every command: those that do not own its org read only its frame.
    const org = requestOrg(frame);
    const owner = org === null ? undefined : this.served.find((s) => s.owns(org));
    if (owner === undefined) return null;
    const request = decodeRequest(frame);
    if (request === null) {
      this.options.log?.warn({ reply }, 'command router: an undecodable command was dropped');
      return null;
    }
    if (request.deadline - this.options.now() < this.options.acceptMarginMs) return null;
    const abandoned = new Expiring(request.deadline, this.options.now);
    if (request.abandoned) abandoned.gone();
    const entry: Taken = { deadline: request.deadline, abandoned, answer: null, packed };
    this.taken.set(reply, entry);
    this.queue(this.now, reply, ACCEPTED, packed);
    return () =>
      void this.decide(owner, request.command, request.deadline, entry.abandoned).then((answer) => {
        const notOwner = answer.t === 'reply' && !answer.reply.ok && answer.reply.code === 'not_owner';
        // Nothing was decided: a re-send of this request may be taken afresh (by whichever node owns it then).
        if (notOwner) this.taken.delete(reply);
        else entry.answer = encodeAnswer(answer);
        this.queue(this.later, reply, entry.answer ?? encodeAnswer(answer), packed);
      });
  }

  private async decide(owner: Served, command: Parameters<CommandHandler>[0], deadline: number, abandoned: Expiring): Promise<WireAnswer> {
    try {
      return { t: 'reply', reply: await owner.handler(command, { deadline, abandoned }) };
    } catch (error) {
      // A refusal (a replica trailing: 503, try again) is expected while a node catches up; anything else is a bug.
      if (error instanceof VigilError) this.options.log?.warn({ err: error, org: command.org }, 'command router: a handler refused');
      else this.options.log?.error({ err: error, org: command.org }, 'command router: a handler threw');
      const message = error instanceof Error ? error.message : String(error);
      if (!(error instanceof VigilError)) return { t: 'error', message };
      return { t: 'error', message, code: error.code, ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }) };
    }
  }

  /** Tells requesters of commands being decided that this owner lives; forgets answered ones past their deadline. */
  private beat(): void {
    const now = this.options.now();
    for (const [reply, entry] of this.taken) {
      if (entry.answer === null) this.queue(this.later, reply, WORKING, entry.packed);
      else if (now > entry.deadline + this.options.heartbeatMs) this.taken.delete(reply);
    }
    if (this.subscription === null && this.taken.size === 0) this.close();
  }

  /**
   * An answer to `reply`: one requester's answers pack together, to `<its inbox>.batch`, when its
   * requests came packed (a requester that sends packs reads them); others go one by one.
   */
  private queue(coalescer: Coalescer, reply: string, data: Uint8Array, packed: boolean): void {
    coalescer.add(packed ? `${PACKED}${reply.slice(0, reply.lastIndexOf('.'))}` : reply, reply, data);
  }

  private answer(destination: string, entries: Keyed[]): void {
    if (entries.length === 1 || !destination.startsWith(PACKED)) {
      for (const [reply, data] of entries) this.send(reply, data);
      return;
    }
    for (const run of packRuns(entries, packLimit(this.nc))) {
      if (run.length === 1) this.send(run[0]![0], run[0]![1]);
      else this.send(`${destination.slice(PACKED.length)}.batch`, packFrames(run));
    }
  }

  private send(subject: string, data: Uint8Array): void {
    if (this.nc.isClosed()) return;
    try {
      this.nc.publish(subject, data);
    } catch (error) {
      this.options.log?.warn({ err: error }, 'command router: an answer could not be sent');
    }
  }

  /** Stops serving and heartbeats at once (the router closes). */
  close(): void {
    this.stop();
    if (this.heartbeat !== null) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }
}
