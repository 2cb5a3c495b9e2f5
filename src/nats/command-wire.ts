import type { NotOwner, OrgCommand, OrgReply } from '../bus/messages.js';
import { ErrorCode } from '../errors.js';

/**
 * What NatsCommandRouter sends over core NATS, JSON-encoded (commands hold only JSON data).
 * A request is framed with its org in front (two bytes of length, then UTF-8), so a node that
 * does not own the org leaves it without parsing the JSON behind. A request carries the command, its deadline (epoch ms) and whether its caller is gone:
 * `RequestOptions.abandoned` is a live flag of the caller's process, so its value crosses at each
 * send, and the requester sends the request again when it finds the flag set while the owner
 * decides (checked at each of the owner's heartbeats: a caller lost is seen within one).
 */
export interface WireRequest {
  command: OrgCommand;
  deadline: number;
  abandoned: boolean;
}

/**
 * The owner's messages to a request's reply subject, in this order: `accepted` once it takes the
 * command (from then on it may decide it), `working` while its handler runs (so the requester
 * knows the owner lives), then one `reply` (the handler's answer, `not_owner` included) or
 * `error` (the handler threw). Nodes that do not own the org send nothing.
 */
export type WireAnswer =
  | { t: 'accepted' }
  | { t: 'working' }
  | { t: 'reply'; reply: OrgReply | NotOwner }
  | { t: 'error'; message: string; code?: ErrorCode; retryAfterSeconds?: number };

const utf8In = new TextEncoder();
const utf8Out = new TextDecoder();

export const encodeAnswer = (value: WireAnswer): Uint8Array => utf8In.encode(JSON.stringify(value));

/** The longest org id a request can carry in its frame (two bytes of length; 0xffff marks a pack). */
const MAX_ORG_BYTES = 0xfffe;

export function encodeRequest(request: WireRequest): Uint8Array {
  const org = utf8In.encode(request.command.org);
  if (org.length > MAX_ORG_BYTES) throw new Error(`an org id of ${org.length} bytes cannot be routed (at most ${MAX_ORG_BYTES})`);
  const body = utf8In.encode(JSON.stringify(request));
  const frame = new Uint8Array(2 + org.length + body.length);
  frame[0] = org.length >> 8;
  frame[1] = org.length & 0xff;
  frame.set(org, 2);
  frame.set(body, 2 + org.length);
  return frame;
}

/** The org of a framed request, read without parsing the command; null if the frame is cut short. */
export function requestOrg(data: Uint8Array): string | null {
  if (data.length < 2) return null;
  const length = (data[0]! << 8) | data[1]!;
  if (length === 0xffff || data.length < 2 + length) return null;
  return utf8Out.decode(data.subarray(2, 2 + length));
}

export function decodeRequest(data: Uint8Array): WireRequest | null {
  const org = requestOrg(data);
  if (org === null) return null;
  const value = parse(data.subarray(2 + ((data[0]! << 8) | data[1]!)));
  if (value === null || typeof value !== 'object') return null;
  const { command, deadline, abandoned } = value as Partial<WireRequest>;
  // The frame's org decides who takes the command: a command of another org is not one.
  if (typeof command !== 'object' || command === null || command.org !== org || typeof deadline !== 'number') return null;
  return { command, deadline, abandoned: abandoned === true };
}

/**
 * Several frames in one NATS message, each under a key (its reply subject): requests sent in the
 * same turn of the event loop to one partition, or answers to one requester's inbox. Two bytes
 * 0xffff first (no request frame starts so), then per entry [u16 key length][key][u32 length][frame].
 * One message per turn instead of one per command is what keeps forwarding cheap under load.
 */
export function packFrames(entries: readonly (readonly [string, Uint8Array])[]): Uint8Array {
  const keys = entries.map(([key]) => utf8In.encode(key));
  let size = 2;
  entries.forEach(([, frame], i) => (size += 6 + keys[i]!.length + frame.length));
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  view.setUint16(0, 0xffff);
  let at = 2;
  entries.forEach(([, frame], i) => {
    const key = keys[i]!;
    if (key.length > 0xffff) throw new Error(`a key of ${key.length} bytes cannot be packed`);
    view.setUint16(at, key.length);
    out.set(key, at + 2);
    at += 2 + key.length;
    view.setUint32(at, frame.length);
    out.set(frame, at + 4);
    at += 4 + frame.length;
  });
  return out;
}

/**
 * Entries in runs that each pack within `limit` bytes (a server's max_payload), in order; an entry
 * too large to share a pack with any other goes alone (as a plain message it may still fit).
 */
export function packRuns(entries: readonly (readonly [string, Uint8Array])[], limit: number): (readonly [string, Uint8Array])[][] {
  const runs: (readonly [string, Uint8Array])[][] = [];
  let run: (readonly [string, Uint8Array])[] = [];
  let size = 2;
  for (const entry of entries) {
    const cost = 6 + utf8In.encode(entry[0]).length + entry[1].length;
    if (run.length > 0 && size + cost > limit) {
      runs.push(run);
      run = [];
      size = 2;
    }
    run.push(entry);
    size += cost;
  }
  if (run.length > 0) runs.push(run);
  return runs;
}

/** The most a pack may hold on `nc`: the server's max_payload less room for the protocol line and headers. */
export function packLimit(nc: { info?: { max_payload: number } }): number {
  return Math.max(64 * 1024, (nc.info?.max_payload ?? 1024 * 1024) - 4096);
}

export const isPack = (data: Uint8Array): boolean => data.length >= 2 && data[0] === 0xff && data[1] === 0xff;

/** The entries of a pack, or null if it is not one or is cut short anywhere. */
export function unpackFrames(data: Uint8Array): Array<[string, Uint8Array]> | null {
  if (!isPack(data)) return null;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const entries: Array<[string, Uint8Array]> = [];
  let at = 2;
  while (at < data.length) {
    if (at + 2 > data.length) return null;
    const keyLength = view.getUint16(at);
    if (at + 2 + keyLength + 4 > data.length) return null;
    const key = utf8Out.decode(data.subarray(at + 2, at + 2 + keyLength));
    at += 2 + keyLength;
    const length = view.getUint32(at);
    if (at + 4 + length > data.length) return null;
    entries.push([key, data.subarray(at + 4, at + 4 + length)]);
    at += 4 + length;
  }
  return entries;
}

export function decodeAnswer(data: Uint8Array): WireAnswer | null {
  const value = parse(data) as Partial<WireAnswer> | null;
  switch (value?.t) {
    case 'accepted':
    case 'working':
      return { t: value.t };
    case 'reply':
      return typeof value.reply === 'object' && value.reply !== null ? { t: 'reply', reply: value.reply } : null;
    case 'error': {
      // A VigilError's code (and Retry-After) travel with it, so the requester answers as the owner would have.
      const code = Object.values(ErrorCode).find((c) => c === value.code);
      const retry = Number.isSafeInteger(value.retryAfterSeconds) && (value.retryAfterSeconds as number) >= 0 ? { retryAfterSeconds: value.retryAfterSeconds } : {};
      return { t: 'error', message: String(value.message), ...(code === undefined ? {} : { code, ...retry }) };
    }
    default:
      return null;
  }
}

function parse(data: Uint8Array): unknown {
  try {
    return JSON.parse(utf8Out.decode(data));
  } catch {
    return null;
  }
}
