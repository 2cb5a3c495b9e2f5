import { VigilError } from '../errors.js';
import type { RateLimiter } from './rate-limit.js';

/**
 * Counts `events` events against the key's rate (VIGIL_KEY_RATE_LIMIT, the limiter every keyed
 * request takes one from): a stream frame's events, a batch's (in place of its request's one).
 * All or nothing: refused, they take nothing from the window and must write nothing; the error
 * carries the seconds until the window resets. More events than the rate allows in a window are
 * taken from an empty one, which they then hold for as long as the rate needs to cover them.
 */
export function chargeEvents(limiter: RateLimiter | null, keyId: string, events: number, now: number): void {
  if (limiter === null) return;
  const decision = limiter.take(keyId, now, events);
  if (!decision.allowed) {
    throw new VigilError('rate_limited', `too many events for this key: ${decision.limit} a second, and ${events} do not fit in what is left`, undefined, {
      retryAfterSeconds: decision.resetSeconds,
    });
  }
}
