import { DEFAULT_DEADLINE_MS, type CommandHandler, type CommandRouter, type RequestOptions, type RouterCapability, type ServeOptions, type Serving } from './command-router.js';
import type { OrgCommand, ReplyTo } from './messages.js';

interface Served {
  handler: CommandHandler;
  owns: (org: string) => boolean;
}

/** How often a request without an owner looks again (owners change rarely; this is a fallback). */
const RETRY_MS = 25;

/**
 * The in-process command router (embedded mode): a command is a direct call to the handler that
 * owns its org, so commands of one caller for one org keep their order. Several handlers may serve
 * (as nodes would); embedded mode has one that owns every org.
 */
export class LocalCommandRouter implements CommandRouter {
  readonly capabilities: readonly RouterCapability[] = ['many-owners'];
  private served: Served[] = [];
  /** Requests waiting for an owner, woken when a handler starts serving. */
  private waiting = new Set<() => void>();
  /** Per org, the last request that had to wait: later ones queue behind it, so order is kept. */
  private readonly queues = new Map<string, Promise<unknown>>();
  private closed = false;

  constructor(private readonly now: () => number = Date.now) {}

  serve(handler: CommandHandler, options: ServeOptions): Serving {
    const entry: Served = { handler, owns: options.owns };
    this.served.push(entry);
    for (const wake of [...this.waiting]) wake();
    return { stop: () => (this.served = this.served.filter((s) => s !== entry)) };
  }

  request<C extends OrgCommand>(command: C, options: RequestOptions = {}): Promise<ReplyTo<C>> {
    const deadline = options.deadline ?? this.now() + DEFAULT_DEADLINE_MS;
    const owner = this.queues.has(command.org) ? undefined : this.ownerOf(command.org);
    // The common case, kept free of extra promises: the owner is here, nothing of the org waits,
    // and the owner keeps the org.
    if (owner === undefined) return this.queued(command, options, deadline);
    return owner.handler(command, options).then((reply) =>
      reply.ok || reply.code !== 'not_owner' ? (reply as ReplyTo<C>) : this.queued(command, options, deadline),
    );
  }

  close(): Promise<void> {
    this.closed = true;
    this.served = [];
    for (const wake of [...this.waiting]) wake();
    return Promise.resolve();
  }

  private ownerOf(org: string): Served | undefined {
    return this.served.find((s) => s.owns(org));
  }

  /** Routes behind the org's earlier waiting requests, each delivered once the one before it is answered. */
  private queued<C extends OrgCommand>(command: C, options: RequestOptions, deadline: number): Promise<ReplyTo<C>> {
    const org = command.org;
    const reply = (this.queues.get(org) ?? Promise.resolve()).then(() => this.route(command, options, deadline));
    const tail = reply.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(org, tail);
    void tail.then(() => {
      if (this.queues.get(org) === tail) this.queues.delete(org);
    });
    return reply;
  }

  /** Routes until an owner decides or the deadline passes. */
  private async route<C extends OrgCommand>(command: C, options: RequestOptions, deadline: number): Promise<ReplyTo<C>> {
    for (;;) {
      const owner = this.ownerOf(command.org);
      if (owner !== undefined) {
        const reply = await owner.handler(command, options);
        if (reply.ok || reply.code !== 'not_owner') return reply as ReplyTo<C>;
      }
      const left = deadline - this.now();
      if (left <= 0 || this.closed) return noOwner(command.org);
      await this.waitForOwner(Math.min(left, RETRY_MS));
    }
  }

  private waitForOwner(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.waiting.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.waiting.add(wake);
    });
  }
}

function noOwner<C extends OrgCommand>(org: string): ReplyTo<C> {
  return { ok: false, code: 'unavailable', message: `no writer of org ${org} answered in time; nothing was recorded, retry` };
}
