import { ensureError, VigilError, type ErrorCode } from '../errors.js';
import type { Logger } from '../log.js';

/** The one table from error codes to HTTP status. */
export const STATUS_OF: Record<ErrorCode, number> = {
  bad_request: 400,
  validation_failed: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  idempotency_conflict: 409,
  phi_refused: 422,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  plan_limit: 403,
  quota_exceeded: 429,
  overloaded: 429,
  unavailable: 503,
  ledger_damaged: 503,
  internal: 500,
};

export interface ErrorResponse {
  status: number;
  body: string;
  headers: Record<string, string>;
}

/** DESIGN §4 error body; anything that is not a VigilError is logged and answered as a 500. */
export function errorResponse(thrown: unknown, log: Logger): ErrorResponse {
  let error: VigilError;
  if (thrown instanceof VigilError) {
    error = thrown;
    // A 500 the code chose to answer (an org's refusal `internal`, a broken invariant) is still an error to look at.
    if (error.code === 'internal') log.error({ err: error }, 'internal error answered');
  } else {
    const cause = ensureError(thrown);
    log.error({ err: cause }, 'unhandled error');
    error = new VigilError('internal', 'internal error');
  }
  const payload: { code: string; message: string; details?: unknown } = { code: error.code, message: error.message };
  if (error.details !== undefined) payload.details = error.details;
  const headers: Record<string, string> = {};
  if (error.retryAfterSeconds !== undefined) headers['retry-after'] = String(error.retryAfterSeconds);
  return { status: STATUS_OF[error.code], body: JSON.stringify({ error: payload }), headers };
}
