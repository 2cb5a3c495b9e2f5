import { z } from 'zod';
import { createWebhookBody, reviewDecisionBody } from '../../domain/schemas.js';
import { BODY, errors, intParam, READ, SCOPED, WRITE } from './common.js';
import type { Operation } from './operation.js';
import { createdWebhook, delivery, pingResult, reviewItem, reviewResult, webhookView } from './responses.js';

const WEBHOOK_ID = 'The webhook\'s id (per org, from 1); another org\'s webhook is not found';

/** Webhooks (scope admin) and the human review loop (scope review). */
export const OVERSIGHT_OPERATIONS: Readonly<Record<string, Operation>> = {
  'GET /webhooks': {
    summary: 'List webhooks',
    description: 'Every webhook of the org, deactivated ones too. Never the secret.',
    tag: 'Webhooks',
    responses: { 200: { description: 'The webhooks', schema: z.array(webhookView) } },
    errors: errors(SCOPED, READ),
  },
  'POST /webhooks': {
    summary: 'Create a webhook',
    description:
      'Deliveries are signed with the secret returned here, once, in two schemes: X-Vigil-Signature (`t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>"` keyed with the whole secret string; Stripe\'s scheme) and Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<t>.<raw body>">` keyed with the base64-decoded part after `whsec_`). The receiver URL must not resolve to a loopback, private, link-local or metadata address (unless VIGIL_WEBHOOK_ALLOW_PRIVATE): 400. 403 `plan_limit` past the plan\'s active webhooks. A new webhook gets deliveries for later ledger records only.',
    tag: 'Webhooks',
    body: createWebhookBody,
    responses: { 200: { description: 'Created, with its secret', schema: createdWebhook } },
    errors: errors(SCOPED, BODY),
  },
  'GET /webhooks/:webhook_id': {
    summary: 'Read a webhook',
    tag: 'Webhooks',
    params: { webhook_id: WEBHOOK_ID },
    responses: { 200: { description: 'The webhook', schema: webhookView } },
    errors: errors(SCOPED, READ, 404),
  },
  'DELETE /webhooks/:webhook_id': {
    summary: 'Deactivate a webhook',
    description: 'The record is kept (`active: false`); its queued deliveries are cancelled.',
    tag: 'Webhooks',
    params: { webhook_id: WEBHOOK_ID },
    responses: { 200: { description: 'The webhook as it now is', schema: webhookView } },
    errors: errors(SCOPED, READ, 404),
  },
  'GET /webhooks/:webhook_id/deliveries': {
    summary: 'List a webhook\'s deliveries',
    description:
      'Newest first. A failed attempt is retried after 1 minute, 5 minutes, 30 minutes, 2 hours and 12 hours (VIGIL_WEBHOOK_RETRY_SCHEDULE); a receiver\'s Retry-After is honoured within the schedule\'s shortest and longest wait, plus up to 10% jitter. The sixth failure is final (`dead`); a 410 Gone is final at once and deactivates the webhook.',
    tag: 'Webhooks',
    params: { webhook_id: WEBHOOK_ID },
    query: z.object({ limit: intParam(1, 500, 50, 'Deliveries listed') }),
    responses: { 200: { description: 'The deliveries', schema: z.array(delivery) } },
    errors: errors(SCOPED, READ, 400, 404),
  },
  'POST /webhooks/:webhook_id/rotate-secret': {
    summary: 'Rotate the signing secret',
    description:
      'Returns a new secret, once. For 24 hours the previous secret keeps signing beside it: every attempt carries both signatures in X-Vigil-Signature (two `v1=`) and in webhook-signature (two `v1,`), so receivers can switch at their pace (`previous_secret_until` says until when). Rotating again within those 24 hours drops the older secret. A body, if sent, must be JSON and is ignored. 409 for a deactivated webhook.',
    tag: 'Webhooks',
    params: { webhook_id: WEBHOOK_ID },
    responses: { 200: { description: 'The webhook with its new secret', schema: createdWebhook } },
    errors: errors(SCOPED, BODY, READ, 404, 409),
  },
  'POST /webhooks/:webhook_id/deliveries/:delivery_id/retry': {
    summary: 'Retry a dead delivery',
    description:
      'Queues a dead delivery for one more attempt now, with the same envelope id (a failure leaves it dead again). One already queued is answered as it is. A body, if sent, must be JSON and is ignored. 409 for a delivered or cancelled delivery, or a deactivated webhook.',
    tag: 'Webhooks',
    params: { webhook_id: WEBHOOK_ID, delivery_id: 'The delivery\'s id (from the deliveries list)' },
    responses: { 200: { description: 'The delivery, queued', schema: delivery } },
    errors: errors(SCOPED, BODY, READ, 404, 409),
  },
  'POST /webhooks/:webhook_id/test': {
    summary: 'Send a test ping',
    description: 'Delivers a signed `ping` now and says what the receiver answered; not stored, not retried. Takes no body. 409 for a deactivated webhook.',
    tag: 'Webhooks',
    params: { webhook_id: WEBHOOK_ID },
    responses: { 200: { description: 'What the receiver answered (a failure is `delivered: false`, not an error)', schema: pingResult } },
    errors: errors(SCOPED, BODY, 404, 409),
  },

  'GET /reviews': {
    summary: 'List held actions',
    description: 'Actions the gate held (hold, alert, collapse). `pending`: the open ones (pending or escalated), oldest first; `decided`: the released and rejected ones, newest first (the latest 10,000).',
    tag: 'Reviews',
    query: z.object({
      status: z.enum(['pending', 'decided']).optional().describe('`pending` (default) or `decided`'),
      limit: intParam(1, 500, 50, 'Items listed'),
      agent_id: z.string().optional().describe('Only this agent\'s actions'),
    }),
    responses: { 200: { description: 'The items', schema: z.array(reviewItem) } },
    errors: errors(SCOPED, READ, 400),
  },
  'POST /reviews/:action_id': {
    summary: 'Decide a held action',
    description:
      'Writes a `review` ledger record and sends `review.<outcome>` to the webhooks. `released` and `rejected` are final (a second decision: 409); `escalated` leaves the action open. Releasing an agent\'s latest open incident vouches for it: its gate goes back to pass (its BII raised to the pass line).',
    tag: 'Reviews',
    params: { action_id: 'The held action\'s id (`action_id` of the ingest result); one not held is not found' },
    body: reviewDecisionBody,
    responses: { 200: { description: 'The decision, and the agent\'s gate after it', schema: reviewResult } },
    errors: errors(SCOPED, BODY, WRITE, 404, 409),
  },
};
