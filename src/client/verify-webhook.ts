import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Webhook signature verification for receivers (spec 6.5). Self-contained on purpose: receivers copy
 * or import this file alone, so it depends on node:crypto only, never on the service's domain code.
 *
 * Usage: pass the raw request body (before any JSON parsing) and the X-Vigil-Signature header.
 */
export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
  constructor(
    readonly code:
      | 'missing_signature'
      | 'malformed_signature'
      | 'stale_timestamp'
      | 'signature_mismatch'
      | 'invalid_json',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
  }
}

export interface VerifyOptions {
  /** Largest accepted |now − t| in seconds. Default 300 (spec 8). */
  toleranceSeconds?: number;
  /** Milliseconds since the epoch. Default Date.now. */
  now?: () => number;
}

const DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * Verifies a delivery per the spec's receiver rules and returns the parsed body; throws WebhookVerificationError otherwise.
 * Order: signature over the exact raw bytes, constant-time compare, timestamp tolerance, then JSON parse,
 * so nothing about an unauthenticated body (not even whether it parses) is acted on.
 */
export function verifyWebhook(
  rawBody: string | Uint8Array,
  signatureHeader: string | null | undefined,
  secret: string,
  options: VerifyOptions = {},
): unknown {
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  // A NaN or negative tolerance would silently disable (or invert) the replay check.
  if (!(tolerance >= 0)) throw new RangeError(`verifyWebhook: toleranceSeconds must be >= 0, got ${tolerance}`);

  const parsed = parseSignatureHeader(signatureHeader);
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  const expected = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${parsed.t}.`, 'utf8').update(body).digest();
  if (!anyEqual(expected, parsed.v1)) {
    throw new WebhookVerificationError('signature_mismatch', 'no v1 signature matches the body and secret');
  }

  const now = (options.now ?? Date.now)();
  if (Math.abs(now / 1000 - Number(parsed.t)) > tolerance) {
    throw new WebhookVerificationError('stale_timestamp', `signature timestamp ${parsed.t} is outside ${tolerance} s`);
  }

  return parseJson(body);
}

interface ParsedHeader {
  /** The digits exactly as sent: the signed message uses them verbatim, not a re-serialized number. */
  t: string;
  v1: Buffer[];
}

/** `t=<digits>,v1=<64 hex>[,v1=…]`, optional spaces after commas; unknown keys (v0, …) are ignored. */
function parseSignatureHeader(header: string | null | undefined): ParsedHeader {
  if (header === null || header === undefined || header.trim() === '') {
    throw new WebhookVerificationError('missing_signature', 'no signature header');
  }
  let t: string | null = null;
  const v1: Buffer[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) throw malformed(`entry without "=": ${part.trim()}`);
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') {
      if (t !== null) throw malformed('more than one t');
      if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) throw malformed(`bad t: ${value}`);
      t = value;
    } else if (key === 'v1') {
      if (!/^[0-9a-fA-F]{64}$/.test(value)) throw malformed('v1 is not 64 hex digits');
      v1.push(Buffer.from(value, 'hex'));
    }
  }
  if (t === null) throw malformed('no t');
  if (v1.length === 0) throw malformed('no v1 signature');
  return { t, v1 };
}

function malformed(detail: string): WebhookVerificationError {
  return new WebhookVerificationError('malformed_signature', `malformed signature header: ${detail}`);
}

/** Compares against every candidate without stopping early, so timing does not reveal which one matched. */
function anyEqual(expected: Buffer, candidates: readonly Buffer[]): boolean {
  let ok = false;
  for (const candidate of candidates) {
    ok = timingSafeEqual(expected, candidate) || ok;
  }
  return ok;
}

/** Strict UTF-8 so a corrupt byte is reported rather than parsed as U+FFFD; a BOM is kept and rejected, as for strings. */
function parseJson(body: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(body)) as unknown;
  } catch (error) {
    throw new WebhookVerificationError('invalid_json', 'body is not valid UTF-8 JSON', { cause: error });
  }
}
