import { LinkKind, type AgentChanges, type PublicLink } from './agent-record.js';
import { canonicalize } from './jcs.js';
import { bodyIsReadable, type LedgerRow } from './ledger.js';
import type { ReviewOutcome } from './schemas.js';
import { EventType, Gate } from './scoring.js';

/**
 * The ledger's record kinds and their bodies, and the one reader of a committed row's body.
 * Recovery, the projections, the deliveries and the bundles read records through `parseRecord`;
 * the org writer decides records of these same types.
 *
 * A body must carry what identifies its record and what the org's rules fold (ids, event type,
 * gate, BII, outcome, agent facts), each of its type. Every other field is checked when present
 * and, absent, reads as the readers always read it: optional (left out of bundles and webhooks),
 * or a default (dti null, payload {}, observed unless false, review only if true, files [],
 * agents null).
 */
export const RecordKind = ['agent', 'event', 'review', 'export'] as const;
export type RecordKind = (typeof RecordKind)[number];

/** An agent's registration. */
export interface AgentRegistration {
  agent_id: string;
  name: string;
  kind: string;
  observed: boolean;
  action?: undefined;
}

/** An admin change of a registered agent. */
export interface AgentUpdate {
  agent_id: string;
  action: 'update';
  changes: AgentChanges;
}

export type AgentRecordBody = AgentRegistration | AgentUpdate;

/** An event and the gate decided for it (the writer always writes every field). */
export interface EventRecordBody {
  event_id: number;
  action_id: number;
  event_type: EventType;
  source?: string;
  actor?: string | null;
  dti: number | null;
  payload: Record<string, unknown>;
  gate_status: Gate;
  bii: number;
  composite_trust?: number;
  reason?: string;
  requires_human_review: boolean;
  policy_digest?: string;
  observed: boolean;
  /** The client's key for this event (DESIGN §9): a retry with it answers this record's result. */
  idempotency_key?: string;
}

/**
 * A reviewer's decision on a held action. The first bodies carried only action_id, outcome, note
 * and reviewer; later ones add the held gate and the agent's gate and BII after the decision.
 */
export interface ReviewRecordBody {
  action_id: number;
  event_id?: number;
  outcome: ReviewOutcome;
  note?: string;
  reviewer?: string;
  held_gate?: Gate;
  gate_status?: Gate | null;
  bii?: number | null;
}

/** An export bundle was made (the bundle itself is not stored). */
export interface ExportRecordBody {
  manifest_sha256: string;
  since_seq: number;
  until_seq: number;
  files: string[];
  agents: string[] | null;
}

/** A committed record less its place in the chain (seq and hashes). Tagged on `kind`. */
export type LedgerRecord =
  | { kind: 'agent'; recordedAt: string; agentId: string; body: AgentRecordBody }
  | { kind: 'event'; recordedAt: string; agentId: string; body: EventRecordBody }
  | { kind: 'review'; recordedAt: string; agentId: string; body: ReviewRecordBody }
  | { kind: 'export'; recordedAt: string; agentId: null; body: ExportRecordBody };

export type AgentRecord = Extract<LedgerRecord, { kind: 'agent' }>;
export type EventRecord = Extract<LedgerRecord, { kind: 'event' }>;
export type ReviewRecord = Extract<LedgerRecord, { kind: 'review' }>;
export type ExportRecord = Extract<LedgerRecord, { kind: 'export' }>;

const KINDS: ReadonlySet<string> = new Set(RecordKind);
const GATES: ReadonlySet<string> = new Set(Gate);
const EVENT_TYPES: ReadonlySet<string> = new Set(EventType);
const LINK_KINDS: ReadonlySet<string> = new Set(LinkKind);
/** Keyed by every outcome, so a new outcome cannot be forgotten here. */
const OUTCOMES: Record<ReviewOutcome, true> = { released: true, rejected: true, escalated: true };

/** A row's kind, when it is one of the four (read without parsing the body). */
export function kindOf(row: LedgerRow): RecordKind | null {
  return KINDS.has(row.kind) ? (row.kind as RecordKind) : null;
}

/**
 * The typed record of a committed row, or null when the row cannot be read as one: its body is
 * not JSON (damage on disk), or not a body of its kind as any version wrote it. A null is what
 * start-up and recovery treat as damage. The body is parsed and checked at most once per row, the
 * result kept on the row for every later reader.
 */
export function parseRecord(row: LedgerRow): LedgerRecord | null {
  let record = row.record;
  if (record === undefined) record = row.record = bodyIsReadable(row) ? readRecord(row, row.body) : null;
  return record;
}

function readRecord(row: LedgerRow, body: unknown): LedgerRecord | null {
  if (!isObject(body)) return null;
  const { recordedAt, agentId } = row;
  if (agentId === null) {
    const export_ = row.kind === 'export' ? readExport(body) : null;
    return export_ === null ? null : { kind: 'export', recordedAt, agentId, body: export_ };
  }
  switch (row.kind) {
    case 'event': {
      const event = readEvent(body);
      return event === null ? null : { kind: 'event', recordedAt, agentId, body: event };
    }
    case 'review': {
      const review = readReview(body);
      return review === null ? null : { kind: 'review', recordedAt, agentId, body: review };
    }
    case 'agent': {
      const agent = body.agent_id === agentId ? readAgent(body) : null;
      return agent === null ? null : { kind: 'agent', recordedAt, agentId, body: agent };
    }
    default:
      return null;
  }
}

function readEvent(b: Record<string, unknown>): EventRecordBody | null {
  const ok =
    typeof b.event_id === 'number' &&
    typeof b.action_id === 'number' &&
    isIn(EVENT_TYPES, b.event_type) &&
    isIn(GATES, b.gate_status) &&
    typeof b.bii === 'number' &&
    (b.source === undefined || typeof b.source === 'string') &&
    (b.actor === undefined || b.actor === null || typeof b.actor === 'string') &&
    (b.composite_trust === undefined || typeof b.composite_trust === 'number') &&
    (b.reason === undefined || typeof b.reason === 'string') &&
    (b.policy_digest === undefined || typeof b.policy_digest === 'string') &&
    (b.idempotency_key === undefined || typeof b.idempotency_key === 'string');
  if (!ok) return null;
  const body = b as unknown as EventRecordBody;
  // As written, unless a default is needed (then a copy: the parsed body is left as it was).
  if ((b.dti === null || typeof b.dti === 'number') && isObject(b.payload) && typeof b.observed === 'boolean' && typeof b.requires_human_review === 'boolean') {
    return body;
  }
  return {
    ...body,
    dti: typeof b.dti === 'number' ? b.dti : null,
    payload: isObject(b.payload) ? b.payload : {},
    observed: b.observed !== false,
    requires_human_review: b.requires_human_review === true,
  };
}

function readReview(b: Record<string, unknown>): ReviewRecordBody | null {
  const ok =
    typeof b.action_id === 'number' &&
    typeof b.outcome === 'string' &&
    OUTCOMES[b.outcome as ReviewOutcome] === true &&
    (b.note === undefined || typeof b.note === 'string') &&
    (b.reviewer === undefined || typeof b.reviewer === 'string') &&
    (b.event_id === undefined || typeof b.event_id === 'number') &&
    (b.held_gate === undefined || isIn(GATES, b.held_gate)) &&
    (b.gate_status === undefined || b.gate_status === null || isIn(GATES, b.gate_status)) &&
    (b.bii === undefined || b.bii === null || typeof b.bii === 'number');
  return ok ? (b as unknown as ReviewRecordBody) : null;
}

function readAgent(b: Record<string, unknown>): AgentRecordBody | null {
  const agentId = b.agent_id as string;
  if (b.action === 'update') {
    const changes = b.changes === undefined ? {} : readChanges(b.changes);
    if (changes === null) return null;
    return changes === b.changes ? (b as unknown as AgentUpdate) : { agent_id: agentId, action: 'update', changes };
  }
  if (b.action !== undefined || typeof b.name !== 'string' || typeof b.kind !== 'string') return null;
  if (typeof b.observed === 'boolean') return b as unknown as AgentRegistration;
  return { agent_id: agentId, name: b.name, kind: b.kind, observed: b.observed !== false };
}

function readChanges(c: unknown): AgentChanges | null {
  if (!isObject(c)) return null;
  const ok =
    (c.name === undefined || typeof c.name === 'string') &&
    (c.kind === undefined || typeof c.kind === 'string') &&
    (c.observed === undefined || typeof c.observed === 'boolean') &&
    (c.is_active === undefined || typeof c.is_active === 'boolean') &&
    (c.public === undefined || typeof c.public === 'boolean') &&
    (c.public_links === undefined || (Array.isArray(c.public_links) && c.public_links.every(isLink)));
  return ok ? c : null;
}

function isLink(link: unknown): link is PublicLink {
  return isObject(link) && isIn(LINK_KINDS, link.kind) && typeof link.url === 'string';
}

function readExport(b: Record<string, unknown>): ExportRecordBody | null {
  const ok =
    typeof b.manifest_sha256 === 'string' &&
    typeof b.since_seq === 'number' &&
    typeof b.until_seq === 'number' &&
    (b.files === undefined || isStrings(b.files)) &&
    (b.agents === undefined || b.agents === null || isStrings(b.agents));
  if (!ok) return null;
  const body = b as unknown as ExportRecordBody;
  return b.files !== undefined && b.agents !== undefined ? body : { ...body, files: body.files ?? [], agents: body.agents ?? null };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isIn(set: ReadonlySet<string>, v: unknown): boolean {
  return typeof v === 'string' && set.has(v);
}

function isStrings(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((s) => typeof s === 'string');
}

/** An event body as the writer writes it: every field (its enums any string: the encoding does not depend on them). */
type EventBodyFields = Required<Omit<EventRecordBody, 'event_type' | 'gate_status' | 'idempotency_key'>> & { event_type: string; gate_status: string; idempotency_key?: string };

const str = JSON.stringify;
const num = (n: number): string => canonicalize(n);

/**
 * JCS of an event body without sorting its keys at run time: the keys are written in their JCS
 * order. Equal to canonicalize(body) byte for byte (a property test holds it to that).
 */
export function eventBodyJson(b: EventBodyFields, payloadJson = canonicalize(b.payload)): string {
  return (
    `{"action_id":${num(b.action_id)},"actor":${b.actor === null ? 'null' : str(b.actor)},"bii":${num(b.bii)},` +
    `"composite_trust":${num(b.composite_trust)},"dti":${b.dti === null ? 'null' : num(b.dti)},"event_id":${num(b.event_id)},` +
    `"event_type":${str(b.event_type)},"gate_status":${str(b.gate_status)},` +
    (b.idempotency_key === undefined ? '' : `"idempotency_key":${str(b.idempotency_key)},`) +
    `"observed":${b.observed},` +
    `"payload":${payloadJson},"policy_digest":${str(b.policy_digest)},"reason":${str(b.reason)},` +
    `"requires_human_review":${b.requires_human_review},"source":${str(b.source)}}`
  );
}
