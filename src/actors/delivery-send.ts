import { formatBody, signingHeaders, type Envelope, type WebhookEvent } from '../domain/webhook.js';
import type { Lookup } from '../net/receiver-address.js';
import { postWebhook, type PostOptions, type PostResult } from '../net/webhook-sender.js';
import { signingSecrets, type WebhookRecord } from '../store/webhook-store.js';
import { VERSION } from '../version.js';

export interface SendOptions {
  now: () => number;
  timeoutMs: number;
  allowPrivate: boolean;
  lookup?: Lookup;
  /** The HTTP client (tests may wrap it to observe attempts; the default posts for real). */
  post?: (options: PostOptions) => Promise<PostResult>;
}

/**
 * One signed request to the webhook's receiver: the body as stored, a fresh signature timestamp,
 * X-Vigil-* and Standard Webhooks headers (`deliveryId`, the envelope id, is also `webhook-id`).
 */
export function sendSigned(options: SendOptions, webhook: WebhookRecord, deliveryId: string, event: WebhookEvent, body: string): Promise<PostResult> {
  const now = options.now();
  const t = Math.floor(now / 1000);
  const post = options.post ?? postWebhook;
  return post({
    url: webhook.url,
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': `vigil-webhooks/${VERSION}`,
      'x-vigil-event': event,
      'x-vigil-delivery': deliveryId,
      ...signingHeaders(signingSecrets(webhook, now), deliveryId, t, body),
    },
    timeoutMs: options.timeoutMs,
    allowPrivate: options.allowPrivate,
    ...(options.lookup === undefined ? {} : { lookup: options.lookup }),
  });
}

export interface PingResult {
  delivered: boolean;
  /** The receiver's status, 0 when there was no HTTP answer. */
  status_code: number;
  error: string | null;
}

/** Sends a signed ping now: not stored, not retried. */
export async function pingWebhook(options: SendOptions & { newId: () => string }, webhook: WebhookRecord): Promise<PingResult> {
  const envelope: Envelope = {
    id: options.newId(),
    event: 'ping',
    org: webhook.org,
    created_at: new Date(options.now()).toISOString(),
    data: { webhook_id: webhook.id, message: 'ping from vigil: this receiver is set up' },
  };
  const result = await sendSigned(options, webhook, envelope.id, 'ping', formatBody(webhook.format, envelope));
  const delivered = isDelivered(result);
  return { delivered, status_code: result.status ?? 0, error: delivered ? null : failureOf(result) };
}

export function isDelivered(result: PostResult): boolean {
  return result.error === null && result.status !== null && result.status >= 200 && result.status < 300;
}

export function failureOf(result: PostResult): string {
  return result.error ?? `receiver answered ${String(result.status)}`;
}

/** A receiver answering 410 Gone says the endpoint is gone for good: its webhook is deactivated. */
export const isGone = (result: PostResult): boolean => result.error === null && result.status === 410;
