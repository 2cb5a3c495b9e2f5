import { pack, Unpackr } from 'msgpackr';
import type uws from 'uWebSockets.js';
import { z } from 'zod';
import { VigilError } from '../errors.js';
import type { KeyRecord } from '../store/registry-store.js';
import type { AppDeps } from './deps.js';
import { errorResponse, type ErrorResponse } from './errors.js';
import { statusLine, type Exchange } from './exchange.js';
import { chargeEvents } from './key-rate.js';
import { RouteObserver } from './observe.js';
import type { RateLimiter } from './rate-limit.js';
import { authorize, type RouterDeps } from './router.js';
import { DEFAULT_DEADLINE_MS } from '../bus/command-router.js';
import { eventSteps, overloaded, type EventOutcome } from './event-intake.js';
import { MAX_BATCH_EVENTS, prefersReceipt } from './routes/ingest.js';
import { StreamKeyWatch, type KeyClose, type WatchedStream } from './stream-keys.js';

/** The stream's subprotocols (DESIGN §9): text frames of JSON (the default), or binary frames of msgpack. */
export const STREAM_PROTOCOLS = ['vigil.v1+json', 'vigil.v1+msgpack'] as const;
export type StreamProtocol = (typeof STREAM_PROTOCOLS)[number];

export const STREAM_PATH = '/events/stream';

/** The largest frame taken; a larger one is answered `overloaded` (the socket's hard cap is 16 MiB). */
export const MAX_FRAME_BYTES = 1024 * 1024;
/** A message over this closes the connection (1009); between the two, it is parsed (to answer with its id) and refused `overloaded`, nothing of it taken. */
const MAX_MESSAGE_BYTES = 2 * MAX_FRAME_BYTES;
/** Answers a connection may hold for a reader that does not read; past it the connection is closed (1008). */
const MAX_HELD_ANSWERS = 1024;
/** msgpack as JSON would have it: 64-bit integers as numbers, maps as objects. */
const unpackr = new Unpackr({ int64AsType: 'number', mapsAsObjects: true, useRecords: false });
/** Answers are held (not sent) while the socket buffers more than this for a slow reader. */
const HIGH_WATER_BYTES = 1024 * 1024;

const frameSchema = z.strictObject({
  id: z.union([z.string().max(256), z.number().int()]),
  events: z.array(z.unknown()).min(1, 'send at least one event').max(MAX_BATCH_EVENTS, `at most ${MAX_BATCH_EVENTS} events`),
});

type FrameId = string | number | null;
type FrameError = { code: string; message: string; details?: unknown; retry_after_seconds?: number };
type ServerFrame = { id: FrameId; results: EventOutcome[] } | { id: FrameId; error: FrameError };

/** What one connection keeps: its key, its protocol, and its answers in the order frames came. */
interface StreamConn {
  /** The key the upgrade was authorised with, as it was then (every frame checks it again). */
  key: KeyRecord;
  /** The connection as the key watch holds it from open to close. */
  watched: WatchedStream | null;
  binary: boolean;
  /** `Prefer: receipt` on the upgrade request: every result carries its signed receipt (DESIGN §10). */
  receipt: boolean;
  /** Frames taken, each answered in turn once its frame (and every earlier one) is ready. */
  answers: { frame: ServerFrame | null; counts: boolean }[];
  inFlight: number;
  /** Set when the socket closes: the writer refuses this connection's undecided events. */
  gone: { aborted: boolean };
}

/** What every connection's frames are taken with. */
interface StreamContext {
  deps: AppDeps;
  limiter: RateLimiter | null;
  keys: StreamKeyWatch;
}

/**
 * `GET /events/stream` (DESIGN §9): a WebSocket on which a runtime sends `{id, events}` frames and
 * gets `{id, results}` back, in the order sent, once the frame's events are durable. Auth is on the
 * upgrade request (401/403/429 as HTTP, no upgrade), and the key is checked again before every frame
 * and every KEY_CHECK_MS: once it is revoked the connection is closed (4401) and writes nothing
 * more. A frame's events count against the key's rate (the upgrade counted one request). A bad
 * frame is answered with an error frame and the connection stays open. A frame is read in its
 * org's turn of the intake (IntakePacer): its events go to the writer a slice per event-loop turn,
 * as the batch route's do, so one org's large frames do not hold the loop from other orgs.
 */
export function mountIngestStream(app: uws.TemplatedApp, deps: AppDeps, routerDeps: RouterDeps): void {
  const streams: StreamContext = { deps, limiter: routerDeps.keyLimiter, keys: new StreamKeyWatch(routerDeps.registry, 'events:write', deps.log) };
  // The upgrade request is a request like any other: counted, and its access line at debug.
  const observer = RouteObserver.of(routerDeps.metrics ?? null, deps.log, 'GET', STREAM_PATH);
  app.ws<StreamConn>(STREAM_PATH, {
    maxPayloadLength: MAX_MESSAGE_BYTES,
    // Seconds without traffic before uWebSockets.js pings (VIGIL_STREAM_IDLE_SECONDS); a peer that does not answer is closed.
    idleTimeout: deps.config.streamIdleSeconds,
    sendPingsAutomatically: true,
    maxBackpressure: 64 * 1024 * 1024,
    upgrade: (res, req, context) => {
      const seen: Exchange | null = observer === null ? null : { res, aborted: false, log: deps.log };
      if (seen !== null) observer?.begin(seen, req);
      const authorization = req.getHeader('authorization');
      const key = req.getHeader('sec-websocket-key');
      const offered = req.getHeader('sec-websocket-protocol');
      const extensions = req.getHeader('sec-websocket-extensions');
      const receipt = prefersReceipt(req.getHeader('prefer'));
      let caller: KeyRecord;
      let protocol: StreamProtocol | '';
      try {
        caller = authorize('events:write', authorization, routerDeps);
        if (seen !== null) seen.keyId = caller.id;
        protocol = chooseProtocol(offered);
      } catch (error) {
        const { status, body, headers } = errorResponse(error, deps.log);
        res.cork(() => {
          res.writeStatus(statusLine(status)).writeHeader('content-type', 'application/json');
          for (const name in headers) res.writeHeader(name, headers[name]!);
          res.end(body);
        });
        if (seen !== null) observer?.answered(seen, status);
        return;
      }
      const conn: StreamConn = { key: caller, watched: null, binary: protocol === 'vigil.v1+msgpack', receipt, answers: [], inFlight: 0, gone: { aborted: false } };
      res.cork(() => res.upgrade(conn, key, protocol, extensions, context));
      if (seen !== null) observer?.answered(seen, 101);
    },
    open: (ws) => {
      const conn = ws.getUserData();
      conn.watched = { key: conn.key, end: (close) => endFor(ws, conn, close) };
      streams.keys.add(conn.watched);
    },
    message: (ws, message, isBinary) => {
      const conn = ws.getUserData();
      if (!keyStillWrites(ws, conn, streams)) return;
      // The message buffer is valid only during this call.
      const bytes = Buffer.from(message.slice(0));
      take(ws, conn, bytes, isBinary, streams);
    },
    drain: (ws) => flush(ws, ws.getUserData()),
    close: (ws) => {
      const conn = ws.getUserData();
      conn.gone.aborted = true;
      if (conn.watched !== null) streams.keys.delete(conn.watched);
    },
  });
}

/** The first protocol offered that the stream speaks; none offered: JSON. Offered but none known: 400. */
function chooseProtocol(offered: string): StreamProtocol | '' {
  if (offered.trim() === '') return '';
  const names = offered.split(',').map((p) => p.trim());
  const known = names.find((p): p is StreamProtocol => (STREAM_PROTOCOLS as readonly string[]).includes(p));
  if (known === undefined) throw new VigilError('bad_request', `no subprotocol of ${offered} is spoken here; use ${STREAM_PROTOCOLS.join(' or ')}`);
  return known;
}

/**
 * Whether the connection's key may still write, checked before the frame is even read: a revoked
 * key's frame is not answered, its connection is closed, and whatever of its earlier frames is
 * still undecided is not recorded (the writer skips an aborted connection's commands).
 */
function keyStillWrites(ws: uws.WebSocket<StreamConn>, conn: StreamConn, context: StreamContext): boolean {
  let close: KeyClose | null;
  try {
    close = context.keys.check(conn.key);
  } catch (error) {
    answerNow(ws, conn, { id: null, error: frameError(errorResponse(error, context.deps.log)) });
    return false;
  }
  if (close === null) return true;
  endFor(ws, conn, close);
  return false;
}

function endFor(ws: uws.WebSocket<StreamConn>, conn: StreamConn, close: KeyClose): void {
  if (conn.gone.aborted) return;
  conn.gone.aborted = true;
  ws.end(close.code, close.reason);
}

/**
 * A frame, read as it comes: parsed and checked (an error frame answers it at once, in its turn),
 * counted against the key's rate and against the org's bound on events waiting (past it,
 * `overloaded` at once, nothing of it taken); then its answer's place is taken and its events go
 * to the writer in the org's turns of the intake (IntakePacer), a slice at a time.
 */
function take(ws: uws.WebSocket<StreamConn>, conn: StreamConn, bytes: Buffer, isBinary: boolean, context: StreamContext): void {
  const { deps } = context;
  const limit = deps.config.streamMaxFrames;
  const frame = readFrame(conn, bytes, isBinary);
  // In the order a frame is checked: readable, then its size, then its shape, then the limits.
  if ('error' in frame && (frame.error.code === 'bad_request' || bytes.length <= MAX_FRAME_BYTES)) return answerNow(ws, conn, frame);
  if (bytes.length > MAX_FRAME_BYTES) return answerNow(ws, conn, { id: frame.id, error: { code: 'overloaded', message: `a frame carries at most ${MAX_FRAME_BYTES} bytes; split it` } });
  if ('error' in frame) return answerNow(ws, conn, frame);
  if (conn.inFlight >= limit) {
    return answerNow(ws, conn, { id: frame.id, error: { code: 'overloaded', message: `at most ${limit} frames of a connection wait for their answers; send this one again later` } });
  }
  const org = conn.key.org;
  try {
    if (!deps.intake.admits(org, frame.events.length)) throw overloaded(org);
    // Nothing of a refused frame is written: the client sends it again, with the same keys, after retry_after_seconds.
    chargeEvents(context.limiter, conn.key.id, frame.events.length, deps.now());
  } catch (error) {
    return answerNow(ws, conn, { id: frame.id, error: frameError(errorResponse(error, deps.log)) });
  }
  const slot: StreamConn['answers'][number] = { frame: null, counts: true };
  conn.answers.push(slot);
  conn.inFlight++;
  const answer = (served: ServerFrame): void => {
    slot.frame = served;
    flush(ws, conn);
  };
  const ingest = { org, events: frame.events, bytes: bytes.length, connection: conn.gone, receipt: conn.receipt, transport: 'stream' as const, deadline: deps.now() + DEFAULT_DEADLINE_MS };
  const steps = eventSteps(deps, ingest, (outcomes) => {
    outcomes.then(
      (results) => answer({ id: frame.id, results }),
      (error: unknown) => answer({ id: frame.id, error: frameError(errorResponse(error, deps.log)) }),
    );
  });
  deps.intake.pace(org, steps, frame.events.length);
}

/** A frame's id and events, or the error frame that answers it. */
function readFrame(conn: StreamConn, bytes: Buffer, isBinary: boolean): { id: FrameId; events: unknown[] } | { id: FrameId; error: FrameError } {
  let raw: unknown;
  try {
    raw = isBinary !== conn.binary ? undefined : conn.binary ? unpackr.unpack(bytes) : JSON.parse(bytes.toString('utf8'));
    // msgpack can carry what JSON cannot (NaN, binary, dates): such a frame is not one.
    if (conn.binary && !isJson(raw)) raw = undefined;
  } catch {
    raw = undefined;
  }
  if (raw === undefined) {
    const expected = conn.binary ? 'binary frames of msgpack (vigil.v1+msgpack)' : 'text frames of JSON (vigil.v1+json)';
    return { id: null, error: { code: 'bad_request', message: `a frame must be one ${expected}` } };
  }
  const id = frameIdOf(raw);
  const parsed = frameSchema.safeParse(raw);
  if (!parsed.success) {
    const details = parsed.error.issues.map((issue) => ({ path: issue.path.map(String).join('.') || 'frame', message: issue.message }));
    return { id, error: { code: 'validation_failed', message: `invalid frame: ${details.map((d) => d.path).join(', ')}`, details } };
  }
  return parsed.data;
}

/** An error as a frame carries it: the HTTP body's error, and its Retry-After (seconds) when it has one. */
function frameError(response: ErrorResponse): FrameError {
  const { error } = JSON.parse(response.body) as { error: FrameError };
  const retry = response.headers['retry-after'];
  return retry === undefined ? error : { ...error, retry_after_seconds: Number(retry) };
}

/** Whether a decoded msgpack value is plain JSON data (finite numbers, strings, booleans, null, arrays, objects). */
function isJson(value: unknown, depth = 0): boolean {
  if (depth > 64) return false;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (Array.isArray(value)) return value.every((v) => isJson(v, depth + 1));
  if (typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) return Object.values(value).every((v) => isJson(v, depth + 1));
  return false;
}

function frameIdOf(raw: unknown): FrameId {
  if (typeof raw !== 'object' || raw === null) return null;
  const id = (raw as { id?: unknown }).id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)) ? id : null;
}

/** An answer that needs no writer, sent in its turn after the answers of earlier frames. */
function answerNow(ws: uws.WebSocket<StreamConn>, conn: StreamConn, frame: ServerFrame): void {
  if (conn.answers.length >= MAX_HELD_ANSWERS) {
    // A peer that keeps sending and never reads: its answers would grow without bound.
    ws.end(1008, 'too many answers unread');
    return;
  }
  conn.answers.push({ frame, counts: false });
  flush(ws, conn);
}

/** Sends the answers that are ready, in order, while the socket is not backed up (else on `drain`). */
function flush(ws: uws.WebSocket<StreamConn>, conn: StreamConn): void {
  if (conn.gone.aborted) return;
  ws.cork(() => {
    while (conn.answers.length > 0 && conn.answers[0]!.frame !== null) {
      if (ws.getBufferedAmount() > HIGH_WATER_BYTES) return;
      const { frame, counts } = conn.answers.shift()!;
      if (counts) conn.inFlight--;
      ws.send(conn.binary ? pack(frame) : JSON.stringify(frame), conn.binary);
    }
  });
}
