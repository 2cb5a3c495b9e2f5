import type { LookupAddress } from 'node:dns';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { ensureError } from '../errors.js';
import { isForbiddenAddress, systemLookup, type Lookup } from './receiver-address.js';

/** One attempt's outcome. Delivered iff 200 <= status < 300 and error is null. */
export interface PostResult {
  status: number | null;
  error: string | null;
  /** The answer's Retry-After header, as sent (null: none, or no answer). */
  retryAfter?: string | null;
}

export interface PostOptions {
  url: string;
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
  allowPrivate: boolean;
  /** Replaces DNS for the connection (tests simulate rebinding with it). */
  lookup?: Lookup;
}

/** We only need the status; past this many body bytes we stop reading and close. */
const BODY_CAP = 1024;

/**
 * Posts once. Never follows redirects (a 3xx is returned as its status, a failure for the caller).
 * Re-checks the address at connection time against DNS rebinding: unless allowPrivate, an
 * IP-literal host is checked before connecting and a hostname is resolved through a `lookup` hook
 * passed to node:http(s).request that refuses forbidden addresses, so the address actually
 * connected to is the one checked. The whole attempt (connect + response) is bounded by timeoutMs
 * → error "timed out after <timeoutMs> ms". The response body is drained and discarded (nothing is
 * kept; reading stops after 1 KiB). Transport errors → { status: null, error: <short message> };
 * a failure after the status arrived keeps the status. Never throws.
 */
export async function postWebhook(options: PostOptions): Promise<PostResult> {
  const target = targetOf(options);
  if (typeof target === 'string') return { status: null, error: target };
  return send(target, options);
}

/** The URL to connect to, or why no connection may be attempted. */
function targetOf(options: PostOptions): URL | string {
  let url: URL;
  try {
    url = new URL(options.url);
  } catch {
    return 'invalid url';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `unsupported scheme ${url.protocol}`;
  const host = hostOf(url);
  if (!options.allowPrivate && isIP(host) !== 0 && isForbiddenAddress(host)) {
    return `refused: ${host} is a loopback/private address`;
  }
  return url;
}

/** The hostname as node:net wants it: IPv6 literals without their URL brackets. */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}

/** Runs the request; resolves exactly once, whichever of response, error or timer comes first. */
function send(url: URL, options: PostOptions): Promise<PostResult> {
  return new Promise((resolve) => {
    let status: number | null = null;
    let retryAfter: string | null = null;
    let req: ClientRequest | undefined;
    let settled = false;
    const finish = (error: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req?.destroy(); // agent: false, so this closes the socket we opened and nothing else
      resolve({ status, error, retryAfter });
    };
    const timer = setTimeout(() => finish(`timed out after ${options.timeoutMs} ms`), options.timeoutMs);
    try {
      req = openRequest(url, options);
      req.on('error', (err) => finish(messageOf(err)));
      req.on('response', (res) => {
        status = res.statusCode ?? null;
        const after = res.headers['retry-after'];
        retryAfter = typeof after === 'string' ? after : null;
        drain(res, finish);
      });
      req.end(options.body);
    } catch (err) {
      finish(messageOf(err)); // e.g. a header value with invalid characters
    }
  });
}

function openRequest(url: URL, options: PostOptions): ClientRequest {
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return request({
    protocol: url.protocol,
    hostname: hostOf(url),
    port: url.port === '' ? undefined : Number(url.port),
    path: `${url.pathname}${url.search}`,
    method: 'POST',
    headers: withContentLength(options.headers, options.body),
    // A fresh agent per request: no pooled socket may skip the lookup hook below.
    agent: false,
    lookup: guardedLookup(options.lookup ?? systemLookup, options.allowPrivate),
  });
}

/** The caller's headers with Content-Length set from the body's bytes (any caller value dropped). */
function withContentLength(headers: Record<string, string>, body: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (name.toLowerCase() !== 'content-length') out[name] = value;
  }
  out['Content-Length'] = String(Buffer.byteLength(body));
  return out;
}

/** Reads the body without keeping it; calls done(null) at its end or once past the cap. */
function drain(res: IncomingMessage, done: (error: string | null) => void): void {
  let seen = 0;
  res.on('data', (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > BODY_CAP) done(null);
  });
  res.on('end', () => done(null));
  res.on('error', (err) => done(messageOf(err)));
  res.on('close', () => done('connection closed before the response ended'));
}

/**
 * A dns.lookup-shaped hook for node:net that resolves with `resolveHost` and, unless allowPrivate,
 * fails the connection if any address is forbidden. Node 20 calls it with `all: true` (happy
 * eyeballs; wants an array) or without (wants one address and its family).
 */
function guardedLookup(resolveHost: Lookup, allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    Promise.resolve()
      .then(() => resolveHost(hostname))
      .then(
        (found) => {
          const picked = screen(hostname, found, familyOf(options.family), allowPrivate);
          if (picked instanceof Error) callback(picked, '');
          else if (options.all) callback(null, picked);
          else callback(null, picked[0]!.address, picked[0]!.family);
        },
        (err: unknown) => callback(ensureError(err), ''),
      );
  };
}

/** The usable addresses for a connection, or the error that refuses it. Never empty. */
function screen(hostname: string, found: { address: string }[], family: 0 | 4 | 6, allowPrivate: boolean): LookupAddress[] | Error {
  const bad = allowPrivate ? undefined : found.find((a) => isForbiddenAddress(a.address));
  if (bad) return codedError(`refused: ${hostname} resolves to ${bad.address}, a loopback/private address`, 'EFORBIDDENADDRESS');
  const usable = found
    .map((a) => ({ address: a.address, family: isIP(a.address) })) // trust the text, not the reported family
    .filter((a) => a.family !== 0 && (family === 0 || a.family === family));
  return usable.length > 0 ? usable : codedError(`${hostname} does not resolve`, 'ENOTFOUND');
}

function familyOf(family: number | 'IPv4' | 'IPv6' | undefined): 0 | 4 | 6 {
  if (family === 4 || family === 'IPv4') return 4;
  if (family === 6 || family === 'IPv6') return 6;
  return 0;
}

function codedError(message: string, code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code });
}

/** A short, human message; happy eyeballs wraps per-address failures in an AggregateError. */
function messageOf(err: unknown): string {
  const e = ensureError(err);
  if (e instanceof AggregateError && e.errors.length > 0) return messageOf(e.errors[0]);
  return e.message || (e as NodeJS.ErrnoException).code || e.name;
}
