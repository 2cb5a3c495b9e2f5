import { Packr } from 'msgpackr';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '../log.js';
import type { DeliveryRecord, WebhookRecord } from '../store/webhook-store.js';
import { ensureKeptStream } from './ledger-stream.js';

/** Where webhooks and deliveries live in cluster mode; tests pass their own names so cases do not meet. */
export interface WebhookStreamNames {
  /** Default `VIGIL_WEBHOOKS`. */
  stream: string;
  /** Default `vigil.webhooks`. */
  subjectPrefix: string;
}

export const WEBHOOK_STREAM: WebhookStreamNames = { stream: 'VIGIL_WEBHOOKS', subjectPrefix: 'vigil.webhooks' };

/**
 * The subjects of the stream:
 *
 * - `<prefix>.<org>.config`: the org's webhook records, one message per write;
 * - `<prefix>.<org>.deliveries`: the org's deliveries, one message per write of new or changed
 *   deliveries with, when it moves, the org's delivery cursor;
 * - `<prefix>.ids`: delivery id block reservations (DeliveryIdBlocks; three tokens, so no org's
 *   subject can be it).
 *
 * Writes to an org's subject present the stream sequence of its last message (fencing, checked by
 * JetStream and again by every replica: WebhookReplica).
 */
export type WebhookSubject = { kind: 'config' | 'deliveries'; org: string } | { kind: 'ids' };

/** An org names one subject token: the org slug rule (domain/schemas.ts) keeps it one. */
const TOKEN = /^[A-Za-z0-9_-]+$/;

export function webhookSubject(names: WebhookStreamNames, subject: WebhookSubject): string {
  if (subject.kind === 'ids') return `${names.subjectPrefix}.ids`;
  if (!TOKEN.test(subject.org)) throw new Error(`org ${JSON.stringify(subject.org)} cannot name a webhook subject`);
  return `${names.subjectPrefix}.${subject.org}.${subject.kind}`;
}

/** Every subject of one org: the last message on it is the org's last write. */
export function orgSubjects(names: WebhookStreamNames, org: string): string {
  if (!TOKEN.test(org)) throw new Error(`org ${JSON.stringify(org)} cannot name a webhook subject`);
  return `${names.subjectPrefix}.${org}.*`;
}

export function parseWebhookSubject(names: WebhookStreamNames, subject: string): WebhookSubject | null {
  if (!subject.startsWith(`${names.subjectPrefix}.`)) return null;
  const tokens = subject.slice(names.subjectPrefix.length + 1).split('.');
  if (tokens.length === 1 && tokens[0] === 'ids') return { kind: 'ids' };
  if (tokens.length !== 2) return null;
  const [org, kind] = tokens as [string, string];
  return kind === 'config' || kind === 'deliveries' ? { kind, org } : null;
}

/** The message bodies, msgpack; `v` is the framing version. */
export type WebhookMessage = { v: 1; type: 'webhook'; webhook: WebhookRecord } | DeliveriesMessage;

/** New and changed deliveries of one org, with its cursor when that moves (null: it stays). */
export interface DeliveriesMessage {
  v: 1;
  type: 'deliveries';
  deliveries: DeliveryRecord[];
  cursor: number | null;
}

const packr = new Packr({ useRecords: false, moreTypes: false });

export function encodeWebhookMessage(message: WebhookMessage): Buffer {
  return packr.pack(message);
}

/** Throws on a message this version cannot read (a broken invariant of the stream). */
export function decodeWebhookMessage(data: Uint8Array): WebhookMessage {
  const value = packr.unpack(data) as Partial<WebhookMessage> | null;
  if (value === null || typeof value !== 'object' || value.v !== 1) throw new Error('not a version 1 webhook message');
  if (value.type === 'webhook' && typeof value.webhook === 'object') return value as WebhookMessage;
  if (value.type === 'deliveries' && Array.isArray(value.deliveries)) return value as WebhookMessage;
  throw new Error(`unknown webhook message type ${JSON.stringify(value.type)}`);
}

/** Creates the webhook stream, or accepts the one there (ensureKeptStream: the same rules as the ledger's). */
export function ensureWebhookStream(jsm: JetStreamManager, names: WebhookStreamNames, replicas: number, log: Logger): Promise<void> {
  return ensureKeptStream(jsm, names, replicas, log, 'webhook store');
}
