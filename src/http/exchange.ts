import type { HttpResponse } from 'uWebSockets.js';
import type { Logger } from '../log.js';
import type { RouteObserver } from './observe.js';

/** One request's answer in progress, and what is known of its connection. */
export interface Exchange {
  res: HttpResponse;
  aborted: boolean;
  /** Where a failure answering it is logged. */
  log: Logger;
  /** True while uWebSockets.js's handler runs: writes are already corked then. */
  inHandler?: boolean;
  /** Reading from the connection is paused until this answer is written (see `awaitAnswer`). */
  paused?: boolean;
  /** Close the connection after this answer (what follows on it cannot be trusted). */
  close?: boolean;
  /** Set while an observed request (GET /metrics, access log) awaits its answer; see RouteObserver. */
  observer?: RouteObserver | undefined;
  /** performance.now() when the request was routed (observed requests). */
  started?: number;
  /** The path and query asked for (observed requests, for the access line). */
  url?: string;
  /** The id of the caller's key (observed requests, for the access line). */
  keyId?: string;
}

/** Records that the client is gone: uWebSockets.js needs this before a handler returns unanswered. */
export function watchAbort(exchange: Exchange): void {
  exchange.res.onAborted(() => {
    exchange.aborted = true;
    // Counted as nginx does a client that left first.
    exchange.observer?.answered(exchange, 499);
  });
}

/**
 * The answer comes later (a durable write, a verification): stop reading from the connection
 * until it is written. uWebSockets.js closes a connection on which a request arrives while an
 * earlier one is unanswered ("async pipelining"); paused, a request the client sends early waits
 * in the socket's buffer and is read once this answer is out. One that arrived in the same read
 * as this request is beyond reach (README, Deployment).
 */
export function awaitAnswer(exchange: Exchange): void {
  if (exchange.aborted || exchange.paused === true) return;
  exchange.paused = true;
  exchange.res.pause();
}

/** Called in the cork of the answer's last write, before `end` (after it `res` is gone). */
export function resumeReading(exchange: Exchange): void {
  if (exchange.paused !== true) return;
  exchange.paused = false;
  exchange.res.resume();
}

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK', 201: '201 Created', 204: '204 No Content', 304: '304 Not Modified', 400: '400 Bad Request',
  401: '401 Unauthorized', 403: '403 Forbidden', 404: '404 Not Found', 409: '409 Conflict',
  413: '413 Payload Too Large', 415: '415 Unsupported Media Type', 429: '429 Too Many Requests',
  500: '500 Internal Server Error', 503: '503 Service Unavailable',
};

/** The status line uWebSockets.js writes for `status`. */
export function statusLine(status: number): string {
  return STATUS_TEXT[status] ?? String(status);
}
