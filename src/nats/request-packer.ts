import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import { Coalescer, type Keyed } from './coalescer.js';
import { packFrames, packLimit, packRuns } from './command-wire.js';

/** How long a pack's reply subject is kept for "no responders" (which NATS sends at once). */
const PACK_MEMORY_MS = 5_000;

/**
 * The requesting side of NatsCommandRouter's packing: requests sent in one turn of the event loop
 * to one subject leave together, a lone one as a plain request (its reply subject its own), several
 * as packs within the server's max_payload, each pack under a reply subject of its own
 * (`<inbox>.p<n>`) so that "no responders" to it can be told to each of its requests (`membersOf`).
 */
export class RequestPacker {
  private readonly outbox = new Coalescer((subject, entries) => this.publish(subject, entries));
  private readonly packs = new Map<string, { replies: string[]; at: number }>();
  private next = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly inbox: string,
    private readonly now: () => number,
    private readonly log?: Logger,
  ) {}

  /** Queues a request (its encoded frame) to `subject` with reply subject `reply`. */
  add(subject: string, reply: string, frame: Uint8Array): void {
    this.outbox.add(subject, reply, frame);
  }

  /** The reply subjects of the requests a pack sent under `subject` carried (once; a plain request's own, else). */
  membersOf(subject: string): string[] {
    const pack = this.packs.get(subject);
    this.packs.delete(subject);
    return pack?.replies ?? [subject];
  }

  private publish(subject: string, entries: Keyed[]): void {
    if (this.nc.isClosed()) return; // the requests meet silence, then their deadline
    for (const run of packRuns(entries, packLimit(this.nc))) {
      try {
        if (run.length === 1) {
          this.nc.publish(subject, run[0]![1], { reply: run[0]![0] });
          continue;
        }
        const reply = `${this.inbox}.p${++this.next}`;
        this.remember(reply, run.map(([key]) => key));
        this.nc.publish(subject, packFrames(run), { reply });
      } catch (error) {
        // Closed meanwhile, or a lone request over the server's max payload: silence, then the deadline.
        this.log?.warn({ err: error, subject }, 'command router: requests could not be sent');
      }
    }
  }

  /** Notes a pack's members, forgetting packs older than PACK_MEMORY_MS (the oldest come first). */
  private remember(reply: string, replies: string[]): void {
    const now = this.now();
    for (const [key, pack] of this.packs) {
      if (now - pack.at < PACK_MEMORY_MS) break;
      this.packs.delete(key);
    }
    this.packs.set(reply, { replies, at: now });
  }
}
