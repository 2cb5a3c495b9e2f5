import type { NotOwner, OrgCommand, OrgReply } from '../bus/messages.js';

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
  | { t: 'error'; message: string };

const utf8In = new TextEncoder();
const utf8Out = new TextDecoder();

export const encodeAnswer = (value: WireAnswer): Uint8Array => utf8In.encode(JSON.stringify(value));

/** The longest org id a request can carry in its frame (two bytes of length). */
const MAX_ORG_BYTES = 0xffff;

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
  if (data.length < 2 + length) return null;
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

export function decodeAnswer(data: Uint8Array): WireAnswer | null {
  const value = parse(data) as Partial<WireAnswer> | null;
  switch (value?.t) {
    case 'accepted':
    case 'working':
      return { t: value.t };
    case 'reply':
      return typeof value.reply === 'object' && value.reply !== null ? { t: 'reply', reply: value.reply } : null;
    case 'error':
      return { t: 'error', message: String(value.message) };
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
