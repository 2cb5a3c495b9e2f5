/** What one step of an ingest did: the commands it sent and when their answers are all in. */
export interface IntakeSlice {
  sent: number;
  answered: Promise<unknown>;
  /** Whether this was the ingest's last step. */
  last: boolean;
}

/**
 * One ingest's work, a step at a time: each call sends the next slice of its events to the org's
 * writer (the first may parse and check a frame first). Null: it had nothing to send and is done
 * (a frame answered with an error).
 */
export type IntakeStep = () => IntakeSlice | null;

const SLICE_EVENTS = 128;
const WINDOW_EVENTS = 512;

interface OrgIntake {
  steps: { step: IntakeStep; left: number }[];
  /** Events of the queued ingests not sent yet. */
  queued: number;
  /** Commands sent and not answered yet. */
  outstanding: number;
}

/**
 * Takes large ingests (stream frames and batch requests of up to 1,000 events) into the org
 * writers a slice at a time: per event-loop turn, one slice of every org with work, round robin.
 * Validating and submitting a thousand events holds the one event loop for milliseconds; in one
 * go, every other tenant's request that arrives meanwhile waits behind it, and behind every other
 * frame read in the same turn. Sliced, the loop reads sockets between slices, so another org's
 * request waits for at most one slice per busy org.
 *
 * An org also has at most `windowEvents` commands sent and unanswered: its later frames wait here,
 * as the bytes they came in, rather than as thousands of parsed events, commands and promises in
 * its writer's queue (a flood's backlog then costs the collector nothing, and other orgs' requests
 * nothing). An org's ingests run in the order they came, so its events reach its writer in order.
 */
export class IntakePacer {
  private readonly orgs = new Map<string, OrgIntake>();
  /** Orgs with a step to run and room in their window, in round-robin order. */
  private readonly ready = new Map<string, OrgIntake>();
  private scheduled = false;

  /**
   * The service's intake: slices of 128 events (about 0.2 ms of work a turn), 512 events per org
   * sent and unanswered, both within the org's bound (VIGIL_MAX_PENDING), which they never pass.
   */
  static bounded(maxPendingEvents: number): IntakePacer {
    return new IntakePacer(Math.min(SLICE_EVENTS, maxPendingEvents), Math.min(WINDOW_EVENTS, maxPendingEvents), maxPendingEvents);
  }

  constructor(
    readonly sliceEvents: number,
    readonly windowEvents: number,
    /** An org's events queued here or unanswered past which a new ingest is refused (VIGIL_MAX_PENDING). */
    readonly maxPendingEvents: number,
  ) {}

  /**
   * Whether an ingest of `events` more fits the org's bound on events waiting (queued here, or
   * sent and unanswered); one that does not is refused `overloaded` before anything of it is
   * taken, as the writer refuses commands past VIGIL_MAX_PENDING. Nothing of the org waiting, any
   * ingest is taken.
   */
  admits(org: string, events: number): boolean {
    const intake = this.orgs.get(org);
    // One ingest larger than the bound is taken when nothing else of the org waits (its slices fit).
    return intake === undefined || intake.queued + intake.outstanding + events <= this.maxPendingEvents;
  }

  /**
   * Queues an ingest of `events` behind the org's earlier ones (admitted first: see `admits`).
   * `now`: an ingest of one slice, run at once when the org has nothing queued and room (a small
   * request pays no extra turn).
   */
  pace(org: string, step: IntakeStep, events: number, now = false): void {
    let intake = this.orgs.get(org);
    if (intake === undefined) this.orgs.set(org, (intake = { steps: [], queued: 0, outstanding: 0 }));
    intake.steps.push({ step, left: events });
    intake.queued += events;
    if (now && intake.steps.length === 1 && intake.outstanding < this.windowEvents) {
      this.run(org, intake);
      return;
    }
    this.wake(org, intake);
  }

  /** Ingests waiting, over every org (for tests and metrics). */
  get waiting(): number {
    let n = 0;
    for (const intake of this.orgs.values()) n += intake.steps.length;
    return n;
  }

  private wake(org: string, intake: OrgIntake): void {
    if (intake.steps.length === 0 || intake.outstanding >= this.windowEvents || this.ready.has(org)) return;
    this.ready.set(org, intake);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.turn);
    }
  }

  /** One slice of every ready org, then the loop reads its sockets before the next turn. */
  private readonly turn = (): void => {
    this.scheduled = false;
    const orgs = [...this.ready];
    this.ready.clear();
    for (const [org, intake] of orgs) this.run(org, intake);
  };

  private run(org: string, intake: OrgIntake): void {
    const entry = intake.steps[0]!;
    let slice: IntakeSlice | null;
    try {
      slice = entry.step();
    } catch {
      // A step reports its own failures to its caller; one that throws has ended.
      slice = null;
    }
    const sent = slice === null ? 0 : Math.min(slice.sent, entry.left);
    entry.left -= sent;
    intake.queued -= sent;
    if (slice === null || slice.last) {
      intake.steps.shift();
      intake.queued -= entry.left;
    }
    if (slice !== null && sent > 0) {
      intake.outstanding += sent;
      const settle = (): void => {
        intake.outstanding -= sent;
        this.settled(org, intake);
      };
      slice.answered.then(settle, settle);
    }
    this.settled(org, intake);
  }

  private settled(org: string, intake: OrgIntake): void {
    if (intake.steps.length === 0 && intake.outstanding === 0) {
      this.orgs.delete(org);
      return;
    }
    this.wake(org, intake);
  }
}
