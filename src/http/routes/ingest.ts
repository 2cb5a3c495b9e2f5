import { z } from 'zod';
import type { IngestResult, OrgReply } from '../../bus/messages.js';
import { idempotencyKey, ingestEventBody, type IngestEventBody } from '../../domain/schemas.js';
import { VigilError } from '../../errors.js';
import { unwrap, type AppDeps } from '../deps.js';
import type { Route } from '../router.js';
import { collection } from './collection.js';
import { validate } from '../validate.js';

/** The most events one `POST /events/batch` (or one stream frame) carries (DESIGN §9). */
export const MAX_BATCH_EVENTS = 1000;

const batchBody = z.strictObject({
  events: z.array(z.unknown()).min(1, 'send at least one event').max(MAX_BATCH_EVENTS, `at most ${MAX_BATCH_EVENTS} events`),
});

/** One event's outcome in a batch: its result, or its error alone (DESIGN §9). */
export type EventOutcome = IngestResult | { error: { code: string; message: string; details?: unknown } };

const INGEST_HEADERS = ['authorization', 'content-type', 'content-length', 'idempotency-key'] as const;

/**
 * Event ingest: one event to the org's single writer, one gate decision back; or a batch of them,
 * each decided alone, answered together once every accepted one is durable. Events of one batch
 * reach the writer in one event-loop turn, so they share its group commit.
 */
export function ingestRoutes(deps: AppDeps): Route[] {
  const ingest: Route['handler'] = async ({ key, body, headers, connection }) => {
    const event = withHeaderKey(validate(ingestEventBody, body), headers['idempotency-key']);
    return { body: unwrap(await deps.commands.request({ type: 'event.ingest', org: key.org, event }, { abandoned: connection })) };
  };
  const batch: Route['handler'] = async ({ key, body, connection }) => {
    const { events } = validate(batchBody, body);
    const results = await ingestEvents(deps, key.org, events, connection);
    return { body: { results } };
  };
  return [
    ...collection({ method: 'post', path: '/events', auth: 'events:write', headers: INGEST_HEADERS, handler: ingest }),
    { method: 'post', path: '/events/batch', auth: 'events:write', handler: batch },
  ];
}

/**
 * Each event validated alone and sent to the writer in order, in one turn (one group commit);
 * the outcomes in the order of `events`. A bad event gets its error; the others are not affected.
 */
export async function ingestEvents(deps: AppDeps, org: string, events: readonly unknown[], connection: { readonly aborted: boolean }): Promise<EventOutcome[]> {
  const pending = events.map((raw, i): Promise<EventOutcome> => {
    let event: IngestEventBody;
    try {
      event = validate(ingestEventBody, raw, `events.${i}`);
    } catch (error) {
      return Promise.resolve(errorOutcome(error));
    }
    return deps.commands.request({ type: 'event.ingest', org, event }, { abandoned: connection }).then(outcomeOf, errorOutcome);
  });
  return Promise.all(pending);
}

function outcomeOf(reply: OrgReply): EventOutcome {
  if (reply.ok) return reply.value as IngestResult;
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
