/** A request sent exactly as given: the body's bytes and the headers, nothing added. */
export interface Outgoing {
  method: string;
  /** Path and query, already encoded. */
  path: string;
  headers?: Record<string, string>;
  /** A string is sent as its UTF-8 bytes (fetch then adds no Content-Type of its own). */
  body?: string | Uint8Array;
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

/** One short line naming a request, for failure messages (never the whole body: it may be a megabyte). */
export function describeRequest(req: Outgoing): string {
  const size = req.body === undefined ? 0 : typeof req.body === 'string' ? Buffer.byteLength(req.body) : req.body.byteLength;
  const head = req.body === undefined ? '' : (typeof req.body === 'string' ? req.body : Buffer.from(req.body).toString('latin1')).slice(0, 160);
  const type = req.headers?.['content-type'];
  const path = req.path.length > 200 ? `${req.path.slice(0, 200)}… (${req.path.length} chars)` : req.path;
  return `${req.method} ${path}${type === undefined ? '' : ` [${type}]`}${size === 0 ? '' : ` body ${size} bytes: ${JSON.stringify(head)}${size > 160 ? '…' : ''}`}`;
}

/**
 * Sends one request over real HTTP (fetch: keep-alive on loopback). A request the server never
 * answers fails after `timeoutMs` with a message naming it, instead of hanging the suite.
 */
export async function send(base: string, req: Outgoing, timeoutMs = 15_000): Promise<Answer> {
  const body = req.body === undefined ? undefined : typeof req.body === 'string' ? Buffer.from(req.body, 'utf8') : req.body;
  let res: Response;
  try {
    res = await fetch(base + req.path, { method: req.method, headers: req.headers ?? {}, body, signal: AbortSignal.timeout(timeoutMs) });
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    throw new Error(`no HTTP answer (${String(error)}${cause === undefined ? '' : `, ${cause}`}) to ${describeRequest(req)}`);
  }
  return { status: res.status, headers: res.headers, text: await res.text() };
}
