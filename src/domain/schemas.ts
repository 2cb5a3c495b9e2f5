import { z } from 'zod';
import { LinkKind } from './agent-record.js';
import { EventType } from './scoring.js';
import { SUBSCRIBABLE_EVENTS, WEBHOOK_FORMATS } from './webhook.js';

/** zod schemas of request bodies and shared value formats; validated once, at the edge. */

const AGENT_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
export const agentId = z.string().regex(AGENT_ID_PATTERN, 'agent_id is 1-128 characters of A-Z a-z 0-9 . _ : -');
export const orgSlug = z
  .string()
  .regex(/^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/, 'org slug is 1-64 lowercase letters, digits or inner hyphens');

export const Scope = ['events:write', 'review', 'admin', 'audit:read'] as const;
export type Scope = (typeof Scope)[number];
export const scopes = z.array(z.enum(Scope)).min(1).max(Scope.length);

export const AgentKind = ['production', 'sandbox', 'system'] as const;
export type AgentKind = (typeof AgentKind)[number];

export const EventSource = ['self', 'platform_hook', 'otel', 'change_feed', 'service'] as const;

export const registerAgentBody = z.strictObject({
  agent_id: agentId,
  name: z.string().trim().min(1).max(200),
  kind: z.enum(AgentKind).default('production'),
  observed: z.boolean().default(true),
});
export type RegisterAgentBody = z.infer<typeof registerAgentBody>;

/** DESIGN §9: 1-128 of A-Z a-z 0-9 . _ : - (the `Idempotency-Key` header, or `idempotency_key` of an event). */
export const idempotencyKey = z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, 'idempotency key is 1-128 characters of A-Z a-z 0-9 . _ : -');

export const ingestEventBody = z.strictObject({
  agent_id: agentId,
  event_type: z.enum(EventType),
  payload: z.record(z.string(), z.unknown()),
  dti: z.number().min(0).max(1).nullable().default(null),
  source: z.enum(EventSource).default('self'),
  actor: z.string().max(256).nullable().default(null),
  idempotency_key: idempotencyKey.optional(),
});
export type IngestEventBody = z.infer<typeof ingestEventBody>;

export const createKeyBody = z.strictObject({
  scopes,
  name: z.string().trim().min(1).max(100).optional(),
});

export const publicLink = z.strictObject({
  kind: z.enum(LinkKind),
  url: z
    .string()
    .max(200, 'url is at most 200 characters')
    .refine((v) => /^https?:\/\/[^\s/?#]+[^\s]*$/i.test(v) && URL.canParse(v), 'url must be an http or https address'),
});

export const updateAgentBody = z
  .strictObject({
    public: z.boolean(),
    public_links: z.array(publicLink).max(5, 'at most 5 public_links'),
    is_active: z.boolean(),
    name: z.string().trim().min(1).max(200),
    kind: z.enum(AgentKind),
    observed: z.boolean(),
  })
  .partial()
  .refine((v) => Object.keys(v).length > 0, 'name at least one field to change');
export type UpdateAgentBody = z.infer<typeof updateAgentBody>;

export const createWebhookBody = z.strictObject({
  url: z
    .string()
    .max(2048, 'url is at most 2048 characters')
    .refine((v) => /^https?:\/\//i.test(v) && URL.canParse(v), 'url must be an http or https address'),
  events: z
    .array(z.enum(SUBSCRIBABLE_EVENTS))
    .min(1, 'subscribe to at least one event')
    .refine((v) => new Set(v).size === v.length, 'events are listed once each'),
  format: z.enum(WEBHOOK_FORMATS).default('json'),
});
export type CreateWebhookBody = z.infer<typeof createWebhookBody>;

export const ReviewOutcome = ['released', 'rejected', 'escalated'] as const;
export type ReviewOutcome = (typeof ReviewOutcome)[number];

export const reviewDecisionBody = z.strictObject({
  outcome: z.enum(ReviewOutcome),
  note: z.string().max(2000, 'note is at most 2000 characters').default(''),
});
export type ReviewDecisionBody = z.infer<typeof reviewDecisionBody>;

export const exportBundleBody = z
  .strictObject({
    since_seq: z.number().int().min(0),
    /** Absent: the org's head (its last seq) when the request is taken. */
    until_seq: z.number().int().min(1).optional(),
    agents: z
      .array(agentId)
      .min(1)
      .max(1000)
      .refine((v) => new Set(v).size === v.length, 'agents are listed once each')
      .nullable()
      .default(null),
  })
  .refine((v) => v.until_seq === undefined || v.since_seq < v.until_seq, { message: 'since_seq must be below until_seq', path: ['since_seq'] });
export type ExportBundleBody = z.infer<typeof exportBundleBody>;
