import type { NotOwner, OrgCommand, OrgReply } from '../bus/messages.js';

/**
 * What NatsCommandRouter sends over core NATS, JSON-encoded (commands hold only JSON data).
 * A request carries the command, its deadline (epoch ms) and whether its caller is gone:
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

export const encodeWire = (value: WireRequest | WireAnswer): Uint8Array => utf8In.encode(JSON.stringify(value));

export function decodeRequest(data: Uint8Array): WireRequest | null {
  const value = parse(data);
  if (value === null || typeof value !== 'object') return null;
  const { command, deadline, abandoned } = value as Partial<WireRequest>;
  if (typeof command !== 'object' || command === null || typeof command.org !== 'string' || typeof deadline !== 'number') return null;
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
