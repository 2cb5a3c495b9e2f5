import { createHmac, randomBytes } from 'node:crypto';
import type { LedgerRecord } from './records.js';

/**
 * Webhook envelope, body formats, signature and retry schedule (spec 3.3, 6.2–6.4).
 * Pure: the delivery actor supplies the envelope, the clock reading `t` and the schedule, and sends
 * exactly the string `formatBody` returns, because that string is what the signature covers.
 */
/** The events a webhook subscribes to (`ping` is accepted and changes nothing: pings are sent on request). */
export const SUBSCRIBABLE_EVENTS = [
  'gate.hold',
  'gate.alert',
  'gate.collapse',
  'review.released',
  'review.rejected',
  'review.escalated',
  'ping',
] as const;
/** Every event a delivery carries: `webhook.disabled` goes to every other active webhook, subscribed or not. */
export const WEBHOOK_EVENTS = [...SUBSCRIBABLE_EVENTS, 'webhook.disabled'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

export const WEBHOOK_FORMATS = ['json', 'siem_hec', 'logs_intake'] as const;
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];

/** Lowercase service name used as Splunk sourcetype, Datadog source/service and the nesting key. */
export const SERVICE_NAME = 'vigil';

export interface Envelope {
  id: string;
  event: WebhookEvent;
  org: string;
  created_at: string;
  data: Record<string, unknown>;
}

/** The exact request body for a format, as a string (the bytes that get signed and sent). */
export function formatBody(format: WebhookFormat, envelope: Envelope): string {
  const env = envelopeFields(envelope);
  switch (format) {
    case 'json':
      return JSON.stringify(env);
    case 'siem_hec':
      return JSON.stringify({ event: env, sourcetype: SERVICE_NAME, time: unixSeconds(env.created_at) });
    case 'logs_intake':
      return JSON.stringify([
        {
          ddsource: SERVICE_NAME,
          service: SERVICE_NAME,
          ddtags: `event:${env.event},org:${env.org}`,
          message: logMessage(env),
          [SERVICE_NAME]: env,
        },
      ]);
    default:
      return unknownFormat(format);
  }
}

/**
 * Copies the five envelope fields in spec order, so the body does not depend on how the caller built
 * the object (key order, or extra properties a structurally typed value may carry).
 */
function envelopeFields(e: Envelope): Envelope {
  return { id: e.id, event: e.event, org: e.org, created_at: e.created_at, data: e.data };
}

/** Splunk HEC `time`: epoch seconds with millisecond decimals. A bad created_at is a broken invariant. */
function unixSeconds(timestamp: string): number {
  const ms = Date.parse(timestamp);
  if (Number.isNaN(ms)) throw new RangeError(`webhook: created_at is not a timestamp: ${timestamp}`);
  return ms / 1000;
}

/** One readable line for log viewers; line breaks in a reviewer's note would split the log entry. */
function logMessage(e: Envelope): string {
  const agent = nonEmptyString(e.data['agent_id']);
  const reason = nonEmptyString(e.data['reason']);
  const line =
    e.event + (agent === null ? '' : ` for agent ${agent}`) + ` in org ${e.org}` + (reason === null ? '' : `: ${reason}`);
  return line.replace(/[\r\n\u2028\u2029]+/g, ' ');
}

function nonEmptyString(value: unknown): string | null {
  return typeof value === 'string' && value.length > 0 ? value : null;
}

function unknownFormat(format: never): never {
  throw new TypeError(`webhook: unknown format ${String(format)}`);
}

/** hex HMAC-SHA256 of `${t}.${body}` keyed with the secret string's UTF-8 bytes (the whole secret, prefix included). */
export function signature(secret: string, t: number, body: string): string {
  // Receivers accept only `t=<digits>`; `${1.5}` or `${1e21}` would sign a header they reject.
  if (!Number.isSafeInteger(t) || t < 0) throw new RangeError(`webhook: t must be integer unix seconds, got ${t}`);
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${t}.${body}`, 'utf8').digest('hex');
}

/** The X-Vigil-Signature header value: `t=<unix seconds>,v1=<hex>`. */
export function signatureHeader(secret: string, t: number, body: string): string {
  return `t=${t},v1=${signature(secret, t, body)}`;
}

/** The Standard Webhooks prefix of a signing secret. */
const SECRET_PREFIX = 'whsec_';

/**
 * A new signing secret: `whsec_` and standard base64 of 32 random bytes (the Standard Webhooks form).
 * Webhooks made before this form carry base64url after the prefix; they sign the same way (both
 * alphabets decode to the key) and a rotation gives them a standard one.
 */
export function newSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** The Standard Webhooks key: the bytes the secret's part after `whsec_` decodes to (base64 or base64url). */
function standardKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

/** base64 HMAC-SHA256 of `${id}.${t}.${body}` keyed with the decoded secret (Standard Webhooks `v1`). */
export function standardSignature(secret: string, id: string, t: number, body: string): string {
  return createHmac('sha256', standardKey(secret)).update(`${id}.${t}.${body}`, 'utf8').digest('base64');
}

/**
 * Every signature header of one attempt: `X-Vigil-Signature` (spec 6.4; Stripe's scheme) and the
 * Standard Webhooks trio. With several secrets (a rotation's 24 hours: the new one first), each
 * header carries one signature per secret, so a receiver holding either verifies.
 */
export function signingHeaders(secrets: readonly string[], id: string, t: number, body: string): Record<string, string> {
  const vigil = secrets.map((s) => `v1=${signature(s, t, body)}`).join(',');
  return {
    'x-vigil-signature': `t=${t},${vigil}`,
    'webhook-id': id,
    'webhook-timestamp': String(t),
    'webhook-signature': secrets.map((s) => `v1,${standardSignature(s, id, t, body)}`).join(' '),
  };
}

/** Attempts per delivery, as JetStream's max deliver on the deliveries consumer: dead at the sixth failure. */
export const MAX_ATTEMPTS = 6;

/**
 * Seconds to wait after the `failures`-th failed attempt (1-based), or null when that failure is the
 * last one allowed (dead). JetStream consumer-backoff semantics, so both modes retry alike: failure k
 * waits schedule[min(k, length) - 1], so a short schedule repeats its last entry and entries past the
 * fifth are never used; the sixth failure is dead whatever the schedule's length.
 * With [60,300,1800,7200,43200], failures 1..5 give 60..43200; with [1], 1 five times.
 */
export function retryDelay(schedule: readonly number[], failures: number): number | null {
  if (!Number.isInteger(failures) || failures < 1) {
    throw new RangeError(`webhook: failures must be a positive integer, got ${failures}`);
  }
  if (schedule.length === 0) throw new RangeError('webhook: the retry schedule is empty');
  if (failures >= MAX_ATTEMPTS) return null;
  return schedule[Math.min(failures, schedule.length) - 1]!;
}

/** How much a Retry-After-led delay may grow, at random, so receivers that named one time are not all hit at once. */
const RETRY_AFTER_JITTER = 0.1;

/**
 * Seconds to wait after a failed attempt whose answer carried `Retry-After` (`afterSeconds`): that
 * wait held within the schedule's bounds (its shortest and longest entry), plus up to a tenth more
 * at random (`random` in [0, 1)), never past the longest. Whether a retry is left at all is
 * retryDelay's to say.
 */
export function retryAfterDelay(schedule: readonly number[], afterSeconds: number, random: number): number {
  const least = Math.min(...schedule);
  const most = Math.max(...schedule);
  const held = Math.min(most, Math.max(least, afterSeconds));
  return Math.min(most, held * (1 + RETRY_AFTER_JITTER * random));
}

/**
 * A Retry-After value in seconds from `now` (ms): delay-seconds or an HTTP date; null when absent
 * or unreadable (the schedule applies then).
 */
export function parseRetryAfter(value: string | null | undefined, now: number): number | null {
  if (value === null || value === undefined) return null;
  const text = value.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text);
  const at = Date.parse(text);
  if (Number.isNaN(at) || !/[a-z]/i.test(text)) return null;
  return Math.max(0, Math.ceil((at - now) / 1000));
}

/** The webhook event a committed record stands for, if any (gate events that hold, review decisions). */
export function webhookEventOf(record: LedgerRecord): WebhookEvent | null {
  if (record.kind === 'event') {
    const gate = record.body.gate_status;
    return gate === 'hold' || gate === 'alert' || gate === 'collapse' ? `gate.${gate}` : null;
  }
  if (record.kind === 'review') return `review.${record.body.outcome}`;
  return null;
}

/**
 * The envelope's `data` for a committed gate or review record at `seq` (spec 6.3): review events
 * add outcome and reviewer, and their reason is the reviewer's note. `policyDigest` stands in for
 * records that carry none.
 */
export function webhookDataOf(record: LedgerRecord, seq: number, policyDigest: string): Record<string, unknown> {
  if (record.kind === 'event') {
    const b = record.body;
    return gateData(record.agentId, b, b.reason, b.policy_digest ?? policyDigest, seq);
  }
  if (record.kind === 'review') {
    const b = record.body;
    return { ...gateData(record.agentId, b, b.note, policyDigest, seq), outcome: b.outcome, reviewer: b.reviewer, held_gate: b.held_gate };
  }
  throw new TypeError(`webhook: an ${record.kind} record makes no webhook`);
}

/** The fields every gate and review delivery carries, in the envelope's order. */
function gateData(
  agentId: string,
  b: { action_id: number; event_id?: number | undefined; gate_status?: string | null | undefined; bii?: number | null | undefined },
  reason: string | undefined,
  policyDigest: string,
  seq: number,
): Record<string, unknown> {
  return { agent_id: agentId, action_id: b.action_id, event_id: b.event_id, gate_status: b.gate_status, bii: b.bii, reason, policy_digest: policyDigest, ledger_seq: seq };
}
