import { parseRetryAfter, retryAfterDelay, retryDelay } from '../domain/webhook.js';
import type { PostResult } from '../net/webhook-sender.js';
import type { DeliveryRecord } from '../store/webhook-store.js';
import { failureOf, isDelivered, isGone } from './delivery-send.js';

/**
 * The delivery after an attempt that got `result` at `now`: delivered, queued for its next attempt,
 * or dead (no attempt left, or the receiver answered 410 Gone). `random` in [0, 1): the jitter on
 * a wait the receiver's Retry-After asked for.
 */
export function afterAttempt(d: DeliveryRecord, result: PostResult, now: number, schedule: readonly number[], random: () => number): DeliveryRecord {
  const attempts = d.attempts + 1;
  if (isDelivered(result)) {
    const at = new Date(now).toISOString();
    return { ...d, status: 'delivered', attempts, next_attempt_at: at, last_status: result.status, delivered_at: at };
  }
  const gone = isGone(result);
  const delay = gone ? null : delayAfter(schedule, attempts, result.retryAfter, now, random);
  return {
    ...d,
    status: delay === null ? 'dead' : 'queued',
    attempts,
    next_attempt_at: new Date(delay === null ? now : now + delay * 1000).toISOString(),
    last_error: gone ? 'receiver answered 410 Gone' : failureOf(result),
    last_status: result.status,
  };
}

/**
 * Seconds before the next attempt after `attempts` failed ones (null: dead): the schedule's, or
 * the receiver's Retry-After held within the schedule's bounds, with jitter.
 */
function delayAfter(schedule: readonly number[], attempts: number, retryAfter: string | null | undefined, now: number, random: () => number): number | null {
  const scheduled = retryDelay(schedule, attempts);
  const asked = parseRetryAfter(retryAfter, now);
  if (scheduled === null || asked === null) return scheduled;
  return retryAfterDelay(schedule, asked, random());
}
