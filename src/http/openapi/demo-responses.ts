import { z } from 'zod';
import { RiskLevel, StudioDomain, StudioStatus } from '../../demo/studio-agent.js';
import { DIMENSIONS, TIERS } from '../../record-scoring/rubric.js';
import { Gate } from '../../domain/scoring.js';
import { timestamp } from './responses.js';

/** Response bodies of the demo routes (spec 2.9, 2.10) and of the record-scoring interface (2.11). */

const gate = z.enum(Gate);
const actions = z.array(z.string());

export const studioAgent = z.strictObject({
  id: z.int().min(1).describe('Per org, from 1'),
  agent_id: z.string().describe('Also the ledger agent (kind sandbox) that records its chats'),
  name: z.string(),
  description: z.string().nullable(),
  domain: z.enum(StudioDomain),
  risk_level: z.enum(RiskLevel),
  status: z.enum(StudioStatus).describe('draft → deployed ⇄ paused; any → retired (final). Only a deployed agent chats'),
  persona: z.string().nullable(),
  allowed_actions: actions,
  forbidden_actions: actions,
  deployed_at: timestamp.nullable(),
  deploy_endpoint: z.string().nullable().describe('Its chat route (POST /chat/{agent_id}) once deployed'),
  created_at: timestamp,
  is_seed: z.boolean().describe('One of the agents every org\'s studio starts with'),
});

export const suggestion = z.strictObject({ description: z.string(), persona: z.string(), allowed_actions: actions, forbidden_actions: actions });

export const chatResult = z.strictObject({
  response: z.string().describe('The agent\'s reply; withheld (a notice instead) when the gate does not pass it'),
  gate_status: gate,
  bii: z.number(),
  composite_trust: z.number(),
  reason: z.string(),
  requires_human_review: z.boolean(),
  event_id: z.int().min(1).describe('The `output_generated` event recorded for this reply'),
  agent_name: z.string(),
  agent_domain: z.string(),
  agent_risk: z.string(),
});

export const chatInfo = z.strictObject({
  agent_id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  domain: z.string(),
  risk_level: z.string(),
  persona: z.string().nullable(),
  status: z.enum(StudioStatus),
  gate: gate.nullable(),
  bii: z.number().nullable(),
  deploy_endpoint: z.string().nullable(),
  provider: z.string().describe('The configured text generator: `builtin` or `openai-compatible`'),
  model: z.string().nullable(),
});

export const sandboxKey = z.strictObject({
  key: z.string().describe('`vsk_…`, shown this once: send it as Authorization: Bearer to POST /api/v1/score'),
  email: z.string().describe('Normalised: trimmed, lower-cased'),
  limit: z.int().describe('Scoring requests it allows in all (it never resets)'),
  remaining: z.int(),
});

const dimension = z.number().min(0).max(1);

export const sidecar = z.strictObject({
  sidecar_id: z.string().describe('`sc_` and 22 random characters'),
  record_id: z.string(),
  score: z.int().min(0).max(100),
  tier: z.enum(TIERS),
  dimensions: z.strictObject({
    provenance: z.strictObject({ score: dimension, source: z.string(), vintage: z.iso.date() }),
    consent: dimension,
    recency: dimension,
    quality: dimension,
    concordance: dimension,
    validation: dimension,
    breadth: dimension,
    stability: dimension,
  }),
  flags: z
    .array(z.strictObject({ dimension: z.enum(DIMENSIONS), code: z.string(), message: z.string(), deduction: z.number().describe('Score points (of 100) it cost') }))
    .describe('Why a dimension lost value'),
  audit_hash: z.string().regex(/^sha256:[0-9a-f]{64}$/).describe('sha256: and the hex SHA-256 of JCS({record, weights, rubric_version})'),
  applied_weights: z.strictObject(Object.fromEntries(DIMENSIONS.map((d) => [d, z.number()])) as Record<(typeof DIMENSIONS)[number], z.ZodNumber>),
  rubric_version: z.string(),
  scored_on: z.iso.date().describe('The UTC day recency was measured against'),
});
