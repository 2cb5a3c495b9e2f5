import type { IngestResult, OrgReply } from '../bus/messages.js';
import type { Receipt } from '../domain/signed-note.js';
import { ingestEventBody, type IngestEventBody } from '../domain/schemas.js';
import { ensureError, VigilError } from '../errors.js';
import type { AppDeps } from './deps.js';
import type { IntakeStep } from './intake-pacer.js';
import { validate } from './validate.js';

/** One event's outcome in a batch: its result (with its receipt if asked), or its error alone (DESIGN §9). */
export type EventOutcome = IngestResult | (IngestResult & { receipt: Receipt }) | { error: { code: string; message: string; details?: unknown } };

/**
 * About the most bytes of events one slice carries: a slice is one command, and in cluster mode one
 * NATS message, which the server takes up to 1 MiB of (JSON of events sent as msgpack can be half as
 * large again, and validation adds defaults).
 */
const SLICE_BYTES = 256 * 1024;

/** One ingest of events into one org: who sends them, and how their outcomes are told. */
export interface EventIngest {
  org: string;
  events: readonly unknown[];
  /** The size of what carried them (the body or the frame): slices are cut by it too. */
  bytes: number;
  connection: { readonly aborted: boolean };
  receipt: boolean;
  transport: 'http' | 'stream';
  /** Epoch ms by which every slice must have reached the writer, counted from receipt. */
  deadline: number;
}

/** Past the org's bound on events waiting: nothing of the ingest is taken. */
export function overloaded(org: string): VigilError {
  return new VigilError('overloaded', `org ${org} has too many events waiting; send them again later`, undefined, { retryAfterSeconds: 1 });
}

/**
 * Each event validated alone and sent to the writer in order, a slice per event-loop turn
 * (IntakePacer); the outcomes in the order of `events`. A bad event gets its error; the others
 * are not affected. Refused whole (`overloaded`, 429) when the org has too many events waiting.
 */
export function ingestEvents(deps: AppDeps, ingest: EventIngest): Promise<EventOutcome[]> {
  if (!deps.intake.admits(ingest.org, ingest.events.length)) return Promise.reject(overloaded(ingest.org));
  return new Promise((resolve, reject) => {
    const step = eventSteps(deps, ingest, (outcomes) => {
      outcomes.then(resolve, reject);
    });
    deps.intake.pace(ingest.org, step, ingest.events.length, ingest.events.length <= deps.intake.sliceEvents);
  });
}

/**
 * The steps of one ingest: each validates and sends the next slice of its events; after the last,
 * `done` gets every outcome in order (and /metrics counts them once they are in).
 *
 * Events are recorded in the order sent or not at all: once a slice comes back refused with nothing
 * of it recorded (overloaded, unavailable, the org changing owner), every later slice not yet sent
 * gets the same refusal, unsent; so does every slice still here past the ingest's deadline.
 */
export function eventSteps(deps: AppDeps, ingest: EventIngest, done: (outcomes: Promise<EventOutcome[]>) => void): IntakeStep {
  const { org, events, connection, receipt, deadline } = ingest;
  const outcomeOf = receipt ? (reply: OrgReply) => (reply.ok ? withReceipt(deps, org, reply.value as IngestResult, reply) : refusalOutcome(reply)) : plainOutcome;
  const outcomeOrError = (reply: OrgReply): EventOutcome => {
    try {
      return outcomeOf(reply);
    } catch (error) {
      return errorOutcome(error);
    }
  };
  // Slices of at most sliceEvents, and of about SLICE_BYTES (from the carrier's size per event).
  const perEvent = (ingest.bytes / Math.max(1, events.length)) * 1.5 + 64;
  const sliceEvents = Math.max(1, Math.min(deps.intake.sliceEvents, Math.floor(SLICE_BYTES / perEvent)));
  const slices: Promise<EventOutcome[]>[] = [];
  /** The refusal every later slice gets, once one was refused unrecorded. */
  let refused: EventOutcome | null = null;
  let from = 0;

  function sendSlice(): ReturnType<IntakeStep> {
    const to = Math.min(events.length, from + sliceEvents);
    const outcomes = new Array<EventOutcome>(to - from);
    if (refused === null && deps.now() > deadline) refused = { error: { code: 'unavailable', message: 'the events waited past their deadline before reaching the writer; nothing of them was recorded, send them again' } };
    let answered: Promise<EventOutcome[]>;
    if (refused !== null) {
      outcomes.fill(refused);
      answered = Promise.resolve(outcomes);
    } else {
      // The slice's valid events go as one command; a bad one has its error in its place.
      const valid: IngestEventBody[] = [];
      const places: number[] = [];
      for (let i = from; i < to; i++) {
        try {
          valid.push(validate(ingestEventBody, events[i], `events.${i}`));
          places.push(i - from);
        } catch (error) {
          outcomes[i - from] = errorOutcome(error);
        }
      }
      answered =
        valid.length === 0
          ? Promise.resolve(outcomes)
          : deps.commands.request({ type: 'events.ingest', org, events: valid, ...(receipt ? { receipt } : {}) }, { abandoned: connection, deadline }).then(
              (reply) => {
                for (let k = 0; k < places.length; k++) {
                  const outcome = reply.ok ? outcomeOrError(reply.value[k]!) : refusalOutcome(reply);
                  outcomes[places[k]!] = outcome;
                  if (refused === null && unrecorded(outcome)) refused = notSent(outcome);
                }
                return outcomes;
              },
              (error: unknown) => {
                const outcome = errorOutcome(error);
                for (const place of places) outcomes[place] = outcome;
                // Its fate unknown: later slices must not be recorded after it.
                refused ??= notSent(outcome);
                return outcomes;
              },
            );
    }
    slices.push(answered);
    const sent = to - from;
    from = to;
    const last = to === events.length;
    if (last) done(Promise.all(slices).then((parts) => counted(deps, ingest, parts.flat())));
    return { sent, answered, last };
  }

  return () => {
    try {
      return sendSlice();
    } catch (error) {
      // Past every per-event guard: the ingest fails whole, as a thrown handler does.
      done(Promise.reject(ensureError(error)));
      return null;
    }
  };
}

/** What the slices after a refused one get, unsent. */
function notSent(outcome: EventOutcome): EventOutcome {
  const code = 'error' in outcome && outcome.error.code === 'overloaded' ? 'overloaded' : 'unavailable';
  return { error: { code, message: 'events before this one were refused; nothing of this one was recorded, send it again' } };
}

/** A refusal that says nothing of the event was recorded and a retry may succeed. */
function unrecorded(outcome: EventOutcome): boolean {
  return 'error' in outcome && (outcome.error.code === 'overloaded' || outcome.error.code === 'unavailable');
}

/** The outcomes, counted in /metrics. */
function counted(deps: AppDeps, ingest: EventIngest, outcomes: EventOutcome[]): EventOutcome[] {
  const metrics = deps.metrics?.metrics;
  if (metrics === undefined) return outcomes;
  metrics.ingestCall(ingest.transport, ingest.events.length);
  for (const outcome of outcomes) {
    if ('error' in outcome) metrics.ingested(ingest.org, 'refused', outcome.error.code);
    else metrics.ingested(ingest.org, outcome.gate_status);
  }
  return outcomes;
}

/** The result with its signed receipt (DESIGN §10), from the log entry the writer answered with. */
export function withReceipt(deps: AppDeps, org: string, result: IngestResult, reply: OrgReply): IngestResult & { receipt: Receipt } {
  if (!reply.ok || reply.entry === undefined) throw new VigilError('internal', 'the writer answered without the record\'s log entry; the event was recorded');
  return { ...result, receipt: deps.transparency.checkpoints.receipt(org, reply.entry) };
}

function plainOutcome(reply: OrgReply): EventOutcome {
  return reply.ok ? (reply.value as IngestResult) : refusalOutcome(reply);
}

function refusalOutcome(reply: Extract<OrgReply, { ok: false }>): EventOutcome {
  return { error: { code: reply.code, message: reply.message } };
}

function errorOutcome(error: unknown): EventOutcome {
  // The router lost the writer after it took the event (cluster mode): its fate is unknown; the
  // event alone says so, and a retry with its idempotency key settles it.
  if (!(error instanceof VigilError)) return { error: { code: 'unavailable', message: `the event's outcome is unknown (${error instanceof Error ? error.message : String(error)}); send it again with its idempotency key` } };
  return { error: { code: error.code, message: error.message, ...(error.details === undefined ? {} : { details: error.details }) } };
}
