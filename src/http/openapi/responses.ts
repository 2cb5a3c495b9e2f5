import { z } from 'zod';
import { LinkKind } from '../../domain/agent-record.js';
import { MONTH } from '../../domain/billing.js';
import { AgentKind, ReviewOutcome, Scope } from '../../domain/schemas.js';
import { EventType, Gate } from '../../domain/scoring.js';
import { SUBSCRIBABLE_EVENTS, WEBHOOK_EVENTS, WEBHOOK_FORMATS } from '../../domain/webhook.js';

/**
 * zod schemas of the JSON bodies the routes answer with, for GET /openapi.json (and for the check
 * that the service answers what they say). Plain data only, so that each converts to JSON Schema;
 * strict where the shape is fixed, so that an undocumented field is caught.
 */

const hex64 = z.string().regex(/^[0-9a-f]{64}$/).describe('64 lowercase hex digits (SHA-256)');
export const timestamp = z.iso.datetime().describe('RFC 3339 UTC with milliseconds and Z');
const count = z.int().min(0);
const seq = z.int().min(1);
const gate = z.enum(Gate);
const bii = z.number().min(0).max(1);

const publicLink = z.strictObject({ kind: z.enum(LinkKind), url: z.string().describe('http or https, at most 200 characters; the owner\'s claim, unchecked') });

export const health = z.strictObject({
  status: z.literal('ok'),
  version: z.string(),
  mode: z.enum(['embedded', 'cluster']),
  node: z.string().optional().describe('Cluster mode: this node\'s name'),
  partitions_owned: z.array(count).optional().describe('Cluster mode: the partitions this node writes for now'),
});

export const clusterMap = z.strictObject({
  org: z.string().describe('The org of the key that asked (its partition is `fnv1a32(org) % partitions`)'),
  partitions: z.int().min(1).describe('Orgs hash to this many partitions (VIGIL_PARTITIONS; 1 in embedded mode)'),
  hash: z.literal('fnv1a32').describe('FNV-1a (32 bit) of the org slug\'s UTF-8 bytes, modulo `partitions`'),
  owners: z.array(z.string().nullable()).describe('Per partition, its owner\'s base URL (VIGIL_BASE_URL), or null while it has none or its owner has not said'),
  version: z.string().regex(/^[0-9a-f]{8}$/).describe('Changes whenever `owners` does; the same on every node that sees the same owners'),
});

export const orgMe = z.strictObject({
  slug: z.string(),
  created_at: timestamp.nullable(),
  plan: z.string().describe('The plan in force (GET /billing/plan)'),
  key: z.strictObject({ id: z.string(), name: z.string().nullable(), scopes: z.array(z.enum(Scope)) }).describe('The key that made this request'),
});

export const createdKey = z.strictObject({
  id: z.string().describe('`key_` and 16 hex digits: names the key in GET /admin/keys and DELETE /admin/keys/{key_id}'),
  key: z.string().describe('The secret (`vgl_…`), shown this once: only its SHA-256 is stored'),
  scopes: z.array(z.enum(Scope)),
  name: z.string().nullable(),
});

export const keyView = z.strictObject({
  id: z.string(),
  name: z.string().nullable(),
  scopes: z.array(z.enum(Scope)),
  created_at: timestamp,
  last_used_at: timestamp.nullable().describe('Recorded a minute at a time'),
  revoked_at: timestamp.nullable(),
});

export const agentView = z.strictObject({
  agent_id: z.string(),
  name: z.string(),
  kind: z.enum(AgentKind),
  observed: z.boolean().describe('Whether the agent was told it is under observation; it is scored either way'),
  is_active: z.boolean().describe('false once retired (permanent)'),
  public: z.boolean(),
  public_links: z.array(publicLink).max(5),
  created_at: timestamp,
  updated_at: timestamp,
});

export const agentSummary = agentView.extend({
  gate: gate.nullable().describe('null before the first scored event'),
  bii: bii.nullable().describe('Behavioral Integrity Index at the last scored event'),
  policy_digest: z.string().nullable().describe('Digest of the policy that produced the current score; null before the first scored event'),
  ledger_records: count,
  last_event_at: timestamp.nullable(),
});

const page = <T extends z.ZodType>(item: T) =>
  z.strictObject({ org: z.string(), total: count, limit: z.int().min(1).max(100), offset: count, agents: z.array(item) });

export const agentList = page(agentSummary);

export const publicRecord = z.strictObject({
  org: z.string(),
  agent_id: z.string(),
  name: z.string(),
  kind: z.enum(AgentKind),
  gate: gate.nullable(),
  bii: bii.nullable(),
  ledger_records: count,
  ledger_head: hex64.nullable().describe('The org\'s ledger head: equals `head` of GET /audit/{agent_id}/verify'),
  last_event_at: timestamp.nullable(),
  observed: z.boolean(),
  policy_digest: z.string(),
  public_links: z.array(publicLink).max(5),
  verify_url: z.string().describe('Where verification instructions are read (a page)'),
});

export const publicList = page(publicRecord);

export const receipt = z
  .strictObject({
    origin: z.string().describe('The log\'s origin, `<host>/vigil/<org>`'),
    seq: seq,
    leaf_hash: hex64,
    recorded_at: timestamp,
    signature: z.string().describe('Base64 Ed25519 over the JCS of the other four fields, verifiable with GET /public/log-key'),
  })
  .describe('Only with `Prefer: receipt`');

export const ingestResult = z.strictObject({
  event_id: seq,
  action_id: seq.describe('The id a reviewer decides on (POST /reviews/{action_id}) when the event is held'),
  gate_status: gate,
  bii: bii,
  composite_trust: z.number(),
  reason: z.string(),
  requires_human_review: z.boolean().describe('The gate held the action: it waits in GET /reviews'),
  receipt: receipt.optional(),
});

export const eventError = z.strictObject({
  error: z.strictObject({
    code: z.string(),
    message: z.string(),
    details: z.array(z.strictObject({ path: z.string(), message: z.string() })).optional(),
  }),
});

export const batchResults = z.strictObject({
  results: z.array(z.union([ingestResult, eventError])).describe('One per event, in request order: its result, or its error alone'),
});

export const verifyResult = z.strictObject({
  ok: z.boolean().describe('Whether the whole chain recomputes'),
  org: z.string(),
  agent_id: z.string(),
  head: hex64.nullable().describe('The org\'s ledger head (its last chain_hash)'),
  length: count.describe('Records checked: the org\'s whole ledger'),
  agent_records: count,
  first_bad_seq: seq.nullable(),
  problem: z.string().nullable(),
  head_check: z
    .strictObject({ head: hex64, is_prefix: z.boolean().describe('The head is the chain hash at some seq of today\'s valid chain'), seq: seq.nullable() })
    .optional()
    .describe('Only with ?head='),
});

export const inclusionProof = z.strictObject({
  seq: seq,
  leaf_index: count,
  tree_size: seq,
  leaf_hash: hex64,
  hashes: z.array(hex64).describe('RFC 9162 inclusion proof, leaf to root'),
  checkpoint: z.string().nullable().describe('The latest signed checkpoint when tree_size is its size (the proof leads to its root); else null'),
});

export const consistencyProof = z.strictObject({ from: seq, to: seq, hashes: z.array(hex64).describe('RFC 9162 consistency proof') });

export const webhookView = z.strictObject({
  id: seq.describe('Per org, from 1'),
  url: z.string(),
  events: z.array(z.enum(SUBSCRIBABLE_EVENTS)),
  format: z.enum(WEBHOOK_FORMATS),
  active: z.boolean(),
  secret_hint: z.string().describe('The last 8 characters of the signing secret'),
  created_at: timestamp,
  previous_secret_until: timestamp.nullable().describe('After a rotation: until when the previous secret still signs beside the current one; else null'),
  disabled_reason: z.string().nullable().describe('Why Vigil deactivated it (its receiver answered 410 Gone, or failed every attempt for VIGIL_WEBHOOK_DISABLE_DAYS); null otherwise'),
});

export const createdWebhook = webhookView.extend({
  secret: z.string().describe('`whsec_` and standard base64 of 32 bytes (the Standard Webhooks form), the signing secret: returned this once'),
});

export const delivery = z.strictObject({
  id: seq,
  event: z.enum(WEBHOOK_EVENTS),
  status: z.enum(['queued', 'delivered', 'dead', 'cancelled']),
  attempts: count,
  next_attempt_at: timestamp.describe('While queued, the next attempt; once final, the last attempt (or creation)'),
  last_error: z.string().nullable(),
  created_at: timestamp,
  delivered_at: timestamp.nullable(),
  envelope_id: z.string().describe('The envelope id receivers see as X-Vigil-Delivery (the same on every attempt)'),
  last_status_code: z.int().nullable().describe('The receiver\'s last HTTP status'),
  ledger_seq: z.int().min(0).describe('The ledger record that made it; 0 for a `webhook.disabled` notice'),
});

export const pingResult = z.strictObject({
  delivered: z.boolean(),
  status_code: z.int().describe('The receiver\'s HTTP status; 0 when none came (transport error)'),
  error: z.string().nullable(),
});

export const reviewItem = z.strictObject({
  action_id: seq,
  event_id: seq,
  agent_id: z.string(),
  gate: gate.describe('The gate that held the action'),
  bii: bii.nullable(),
  reason: z.string(),
  event_type: z.enum(EventType),
  recorded_at: timestamp,
  ledger_seq: seq,
  status: z.enum(['pending', 'escalated', 'released', 'rejected']).describe('pending or escalated: still open'),
  note: z.string().nullable(),
  reviewer: z.string().nullable(),
  decided_at: timestamp.nullable(),
});

export const reviewResult = z.strictObject({
  action_id: seq,
  event_id: seq,
  agent_id: z.string(),
  outcome: z.enum(ReviewOutcome),
  note: z.string(),
  reviewer: z.string().describe('The deciding key\'s name (its id when unnamed)'),
  held_gate: gate.describe('The gate that held the action'),
  gate_status: gate.nullable().describe('The agent\'s gate after the decision (a release of its latest incident lifts it to pass)'),
  bii: bii.nullable(),
  decided_at: timestamp,
});

const exportFields = {
  manifest_sha256: hex64,
  since_seq: count.describe('Exclusive'),
  until_seq: seq.describe('Inclusive'),
  files: z.array(z.string()),
  agents: z.array(z.string()).nullable().describe('The agents filter; null for every agent'),
  seq: seq.describe('The seq of the `export` ledger record'),
  recorded_at: timestamp,
  chain_hash: hex64,
};

export const exportEntry = z.strictObject(exportFields);

export const bundle = z.strictObject({
  export: z.strictObject(exportFields).describe('The `export` ledger record this bundle made'),
  manifest: z.strictObject({
    format: z.literal('vigil-bundle/1'),
    org: z.string(),
    since_seq: count,
    until_seq: seq,
    records: count.describe('until_seq - since_seq'),
    start_hash: hex64.describe('Chain hash at since_seq (64 zeros when since_seq is 0)'),
    end_hash: hex64.describe('Chain hash at until_seq'),
    policy_digests: z.array(z.string()),
    agents: z.array(z.string()).nullable(),
    files: z.array(z.strictObject({ name: z.string(), bytes: count, sha256: hex64 })),
    created_at: timestamp,
  }),
  files: z
    .record(z.string(), z.string())
    .describe('Each file\'s text by name: ledger.jsonl, cards.json, incidents.jsonl, oversight.jsonl, checkpoint.txt, merkle.json, manifest.json, manifest.sha256'),
});

const planLimits = z.strictObject({ events_per_month: count, agents: count, webhooks: count, public_agents: count, exports_per_month: count });
const money = z.string().regex(/^\d+\.\d{2}$/).describe('A decimal amount, e.g. 49.00');

export const billingPlan = z.strictObject({
  org: z.string(),
  plan: z.string(),
  limits: planLimits,
  billing_email: z.string().nullable(),
  plan_price: money.describe('Monthly price'),
  currency: z.string(),
  upgrade: z.string().describe('The pricing page'),
});

export const statement = z.strictObject({
  org: z.string(),
  month: z.string().regex(MONTH).describe('YYYY-MM, UTC'),
  plan: z.string(),
  limits: planLimits,
  usage: z.strictObject({ events: count, agents_active: count, webhook_deliveries: count, exports: count }),
  plan_price: money.describe('0.00 for a month before the org existed'),
  overage: z.array(z.strictObject({ item: z.string(), quantity: count, unit: z.string(), unit_price: money.nullable(), amount: money.nullable() })),
  total: money,
  currency: z.string(),
  upgrade: z.string(),
});
