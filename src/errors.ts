/**
 * Errors with stable codes. HTTP status is chosen from a table in `http/`, never here.
 * Expected outcomes (duplicate, unknown agent) travel as values; these are thrown at the edge
 * (validation, auth) and for broken invariants or infrastructure failures.
 */
export const ErrorCode = {
  badRequest: 'bad_request',
  validation: 'validation_failed',
  unauthorized: 'unauthorized',
  forbidden: 'forbidden',
  notFound: 'not_found',
  conflict: 'conflict',
  /** An idempotency key used before with a different request (DESIGN §9). */
  idempotencyConflict: 'idempotency_conflict',
  /** The record carries personal health information (record-scoring sandbox): refused, never stored. */
  phiRefused: 'phi_refused',
  tooLarge: 'payload_too_large',
  unsupportedMedia: 'unsupported_media_type',
  rateLimited: 'rate_limited',
  planLimit: 'plan_limit',
  quotaExceeded: 'quota_exceeded',
  overloaded: 'overloaded',
  unavailable: 'unavailable',
  /** A row of the org's ledger cannot be read: its writes are refused until an operator repairs it. */
  ledgerDamaged: 'ledger_damaged',
  internal: 'internal',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export interface ErrorDetail {
  path: string;
  message: string;
}

export class VigilError extends Error {
  override name = 'VigilError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    options?: { cause?: unknown; retryAfterSeconds?: number },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }
  readonly retryAfterSeconds: number | undefined;
}

/** Normalizes anything thrown into an Error, at every catch boundary. */
export function ensureError(value: unknown): Error {
  if (value instanceof Error) return value;
  return new Error(typeof value === 'string' ? value : JSON.stringify(value));
}

/**
 * The service cannot start until the operator acts: its data dir is served by another process, or
 * it cannot listen on the address configured. The CLI prints the message alone, without a stack.
 */
export class StartError extends Error {
  override name = 'StartError';
  constructor(
    readonly code: 'data_dir_locked' | 'listen_failed' | 'cluster_unavailable' | 'cluster_mismatch',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
  }
}
