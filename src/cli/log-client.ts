import { z } from 'zod';

/** How long one request may take before the monitor reports the log unreachable. */
const REQUEST_TIMEOUT_MS = 15_000;

/**
 * A request to the log did not get an answer to judge: no connection, a timeout, or a status
 * other than 200 (404: the org has no public agent; 429 and 503 pass). Retryable: it says nothing
 * about the log's honesty.
 */
export class LogReadError extends Error {
  override name = 'LogReadError';
  constructor(
    readonly code: 'unreachable' | 'http_status',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
  }
}

/** The public transparency routes of one org on one Vigil server (DESIGN §10), read with global fetch. */
export class PublicLog {
  constructor(
    /** The server's base URL, without a trailing slash. */
    readonly base: string,
    readonly org: string,
  ) {}

  get checkpointUrl(): string {
    return `${this.base}/public/checkpoints/${encodeURIComponent(this.org)}`;
  }

  consistencyUrl(from: number, to: number): string {
    return `${this.base}/public/proof/${encodeURIComponent(this.org)}/consistency?from=${from}&to=${to}`;
  }

  /** The latest signed checkpoint note, unchecked. */
  checkpoint(signal: AbortSignal): Promise<string> {
    return get(this.checkpointUrl, signal);
  }

  /** The consistency proof's hashes; a 200 answer that is not the proof asked for is a `problem`. */
  async consistency(from: number, to: number, signal: AbortSignal): Promise<{ ok: true; hashes: Buffer[] } | { ok: false; problem: string }> {
    const text = await get(this.consistencyUrl(from, to), signal);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return { ok: false, problem: 'the answer is not JSON' };
    }
    const parsed = consistencyProof.safeParse(json);
    if (!parsed.success) return { ok: false, problem: `${parsed.error.issues[0]?.path.join('.') || 'body'}: ${parsed.error.issues[0]?.message ?? 'invalid'}` };
    if (parsed.data.from !== from || parsed.data.to !== to) return { ok: false, problem: `it proves ${parsed.data.from} → ${parsed.data.to}, not ${from} → ${to}` };
    return { ok: true, hashes: parsed.data.hashes.map((h) => Buffer.from(h, 'hex')) };
  }
}

const consistencyProof = z.object({
  from: z.number(),
  to: z.number(),
  hashes: z.array(z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 hash in hex')).max(128),
});

async function get(url: string, signal: AbortSignal): Promise<string> {
  let res: Response;
  let text: string;
  try {
    res = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]) });
    text = await res.text();
  } catch (error) {
    if (signal.aborted) throw error;
    const cause = (error as Error).cause;
    const why = (error as Error).name === 'TimeoutError' ? `no answer in ${REQUEST_TIMEOUT_MS / 1000} s` : cause instanceof Error ? cause.message : (error as Error).message;
    throw new LogReadError('unreachable', `GET ${url}: ${why}`, { cause: error });
  }
  if (res.status !== 200) throw new LogReadError('http_status', `GET ${url}: HTTP ${res.status}${summary(text)}`);
  return text;
}

/** The server's error message, if it sent its JSON error body; else nothing (never a whole page). */
function summary(text: string): string {
  try {
    const message = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    return typeof message === 'string' ? ` (${message})` : '';
  } catch {
    return '';
  }
}
