import { z } from 'zod';
import type { Receipt } from '../../domain/signed-note.js';
import type { IngestResult, OrgReply } from '../../bus/messages.js';
import { idempotencyKey, ingestEventBody, type IngestEventBody } from '../../domain/schemas.js';
import { ensureError, VigilError } from '../../errors.js';
import { unwrap, type AppDeps } from '../deps.js';
import type { IntakeStep } from '../intake-pacer.js';
import type { Route } from '../router.js';
import { collection } from './collection.js';
import { validate } from '../validate.js';

/** The most events one `POST /events/batch` (or one stream frame) carries (DESIGN §9). */
export const MAX_BATCH_EVENTS = 1000;

export const batchBody = z.strictObject({
  events: z.array(z.unknown()).min(1, 'send at least one event').max(MAX_BATCH_EVENTS, `at most ${MAX_BATCH_EVENTS} events`),
});

/** One event's outcome in a batch: its result (with its receipt if asked), or its error alone (DESIGN §9). */
export type EventOutcome = IngestResult | (IngestResult & { receipt: Receipt }) | { error: { code: string; message: string; details?: unknown } };

const INGEST_HEADERS = ['authorization', 'content-type', 'content-length', 'idempotency-key', 'prefer'] as const;
const BATCH_HEADERS = ['authorization', 'content-type', 'content-length', 'prefer'] as const;
const RECEIPT_APPLIED = { 'preference-applied': 'receipt' };

/**
 * Event ingest: one event to the org's single writer, one gate decision back; or a batch of them,
 * each decided alone, answered together once every accepted one is durable. A batch's events reach
 * the writer a slice (128) per event-loop turn, in order, and share its group commits.
 */
export function ingestRoutes(deps: AppDeps): Route[] {
  const ingestOne: Route['handler'] = async ({ key, body, headers, connection }) => {
    const event = withHeaderKey(validate(ingestEventBody, body), headers['idempotency-key']);
    const receipt = prefersReceipt(headers.prefer);
    const reply = await deps.commands.request({ type: 'event.ingest', org: key.org, event, ...(receipt ? { receipt } : {}) }, { abandoned: connection });
    const result = unwrap(reply);
    if (!receipt) return { body: result };
    return { body: withReceipt(deps, key.org, result, reply), headers: RECEIPT_APPLIED };
  };
  const metrics = deps.metrics?.metrics ?? null;
  const ingest: Route['handler'] =
    metrics === null
      ? ingestOne
      : async (ctx) => {
          metrics.ingestCall('http', 1);
          try {
            const answer = await ingestOne(ctx);
            metrics.ingested(ctx.key.org, (answer as { body: IngestResult }).body.gate_status);
            return answer;
          } catch (error) {
            metrics.ingested(ctx.key.org, 'refused', error instanceof VigilError ? error.code : 'internal');
            throw error;
          }
        };
  const batch: Route['handler'] = async ({ key, body, headers, connection }) => {
    const { events } = validate(batchBody, body);
    const receipt = prefersReceipt(headers.prefer);
    const results = await ingestEvents(deps, { org: key.org, events, connection, receipt, transport: 'http' });
    return receipt ? { body: { results }, headers: RECEIPT_APPLIED } : { body: { results } };
  };
  return [
    ...collection({ method: 'post', path: '/events', auth: 'events:write', headers: INGEST_HEADERS, handler: ingest }),
    { method: 'post', path: '/events/batch', auth: 'events:write', headers: BATCH_HEADERS, events: eventsOf, handler: batch },
  ];
}

/** A batch body's events, as the key's rate counts them; a body that is no batch counts one, as a request (the handler refuses it). */
function eventsOf(body: unknown): number {
  const events = typeof body === 'object' && body !== null ? (body as { events?: unknown }).events : undefined;
  return Array.isArray(events) && events.length >= 1 && events.length <= MAX_BATCH_EVENTS ? events.length : 1;
}

/**
 * Whether a `Prefer` header (RFC 7240: comma-separated preferences, each a token with optional
 * parameters) asks for `receipt`.
 */
export function prefersReceipt(header: string | undefined): boolean {
  if (header === undefined) return false;
  return header.split(',').some((preference) => preference.split(';', 1)[0]!.trim().toLowerCase() === 'receipt');
}

/** The result with its signed receipt (DESIGN §10), from the log entry the writer answered with. */
function withReceipt(deps: AppDeps, org: string, result: IngestResult, reply: OrgReply): IngestResult & { receipt: Receipt } {
  if (!reply.ok || reply.entry === undefined) throw new VigilError('internal', 'the writer answered without the record\'s log entry; the event was recorded');
  return { ...result, receipt: deps.transparency.checkpoints.receipt(org, reply.entry) };
}

/** One ingest of events into one org: who sends them, and how their outcomes are told. */
export interface EventIngest {
  org: string;
  events: readonly unknown[];
  connection: { readonly aborted: boolean };
  receipt: boolean;
  transport: 'http' | 'stream';
}

/**
 * Each event validated alone and sent to the writer in order, a slice per event-loop turn
 * (IntakePacer); the outcomes in the order of `events`. A bad event gets its error; the others
 * are not affected.
 */
export function ingestEvents(deps: AppDeps, ingest: EventIngest): Promise<EventOutcome[]> {
  return new Promise((resolve, reject) => {
    const step = eventSteps(deps, ingest, (outcomes) => {
      outcomes.then(resolve, reject);
    });
    deps.intake.pace(ingest.org, step, ingest.events.length <= deps.intake.sliceEvents);
  });
}

/**
 * The steps of one ingest: each validates and sends the next slice of its events; after the last,
 * `done` gets every outcome in order (and /metrics counts them once they are in).
 */
export function eventSteps(deps: AppDeps, ingest: EventIngest, done: (outcomes: Promise<EventOutcome[]>) => void): IntakeStep {
  const { org, events, connection, receipt } = ingest;
  const outcomeOf = receipt ? (reply: OrgReply) => (reply.ok ? withReceipt(deps, org, reply.value as IngestResult, reply) : refusalOutcome(reply)) : plainOutcome;
  const outcomeOrError = (reply: OrgReply): EventOutcome => {
    try {
      return outcomeOf(reply);
    } catch (error) {
      return errorOutcome(error);
    }
  };
  const slices: Promise<EventOutcome[]>[] = [];
  let from = 0;
  return () => {
    try {
      return sendSlice();
    } catch (error) {
      // Past every per-event guard: the ingest fails whole, as a thrown handler does.
      done(Promise.reject(ensureError(error)));
      return null;
    }
  };
  function sendSlice(): ReturnType<IntakeStep> {
    const to = Math.min(events.length, from + deps.intake.sliceEvents);
    // The slice's valid events go as one command; a bad one has its error in its place.
    const outcomes = new Array<EventOutcome>(to - from);
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
    const answered: Promise<EventOutcome[]> =
      valid.length === 0
        ? Promise.resolve(outcomes)
        : deps.commands.request({ type: 'events.ingest', org, events: valid, ...(receipt ? { receipt } : {}) }, { abandoned: connection }).then(
            (reply) => {
              for (let k = 0; k < places.length; k++) outcomes[places[k]!] = reply.ok ? outcomeOrError(reply.value[k]!) : refusalOutcome(reply);
              return outcomes;
            },
            (error: unknown) => {
              const outcome = errorOutcome(error);
              for (const place of places) outcomes[place] = outcome;
              return outcomes;
            },
          );
    slices.push(answered);
    const sent = to - from;
    from = to;
    const last = to === events.length;
    if (last) done(Promise.all(slices).then((parts) => counted(deps, ingest, parts.flat())));
    return { sent, answered, last };
  }
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

/** The `Idempotency-Key` header, checked, as the event's key (the body may name the same one). */
function withHeaderKey(event: IngestEventBody, header: string | undefined): IngestEventBody {
  if (header === undefined) return event;
  const parsed = idempotencyKey.safeParse(header);
  if (!parsed.success) throw new VigilError('validation_failed', 'invalid Idempotency-Key header', [{ path: 'Idempotency-Key', message: parsed.error.issues[0]!.message }]);
  if (event.idempotency_key !== undefined && event.idempotency_key !== header) {
    throw new VigilError('validation_failed', 'the Idempotency-Key header and the body\'s idempotency_key differ', [{ path: 'idempotency_key', message: 'must equal the Idempotency-Key header' }]);
  }
  return { ...event, idempotency_key: header };
}
