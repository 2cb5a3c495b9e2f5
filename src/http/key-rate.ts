import { VigilError } from '../errors.js';
import type { RateLimiter } from './rate-limit.js';

/**
 * Counts `events` events against the key's rate (VIGIL_KEY_RATE_LIMIT, the limiter every keyed
 * request takes one from), less `counted` already taken for them: a batch's request counted one
 * on its way in, a stream frame none. All or nothing: refused, the events take nothing from the
 * window and must write nothing.
 *
 * Throws `rate_limited` (with the seconds until the window resets) when they do not fit in what
 * is left of this second, and `validation_failed` when they could fit in no second at all (more
 * events at once than the rate): sent again unchanged, such a batch would be refused forever.
 */
export function chargeEvents(limiter: RateLimiter | null, keyId: string, events: number, now: number, counted = 0): void {
  if (limiter === null) return;
  const { limit } = limiter;
  if (events > limit) {
    throw new VigilError('validation_failed', `this key may send ${limit} events a second (VIGIL_KEY_RATE_LIMIT): send at most ${limit} events at once`, [
      { path: 'events', message: `at most ${limit} events at this key's rate` },
    ]);
  }
  if (events <= counted) return;
  const decision = limiter.take(keyId, now, events - counted);
  if (!decision.allowed) {
    throw new VigilError('rate_limited', `too many events for this key: ${limit} a second, ${decision.remaining} left in this one`, undefined, {
      retryAfterSeconds: decision.resetSeconds,
    });
  }
}
