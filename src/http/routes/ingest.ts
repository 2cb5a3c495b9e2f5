import { z } from 'zod';
import type { IngestResult } from '../../bus/messages.js';
import { idempotencyKey, ingestEventBody, type IngestEventBody } from '../../domain/schemas.js';
import { VigilError } from '../../errors.js';
import { unwrap, type AppDeps } from '../deps.js';
import { DEFAULT_DEADLINE_MS } from '../../bus/command-router.js';
import { ingestEvents, withReceipt, type EventOutcome } from '../event-intake.js';
import type { Route } from '../router.js';
import { collection } from './collection.js';
import { validate } from '../validate.js';

/** The most events one `POST /events/batch` (or one stream frame) carries (DESIGN §9). */
export const MAX_BATCH_EVENTS = 1000;

export const batchBody = z.strictObject({
  events: z.array(z.unknown()).min(1, 'send at least one event').max(MAX_BATCH_EVENTS, `at most ${MAX_BATCH_EVENTS} events`),
});

export type { EventOutcome };

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
    const bytes = Number(headers['content-length'] ?? 0) || JSON.stringify(events).length;
    const ingest = { org: key.org, events, bytes, connection, receipt, transport: 'http' as const, deadline: deps.now() + DEFAULT_DEADLINE_MS };
    const results = await ingestEvents(deps, ingest);
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
