import { webhookView } from '../../services/webhook-registry.js';
import { createWebhookBody } from '../../domain/schemas.js';
import { VigilError } from '../../errors.js';
import type { DeliveryRecord, WebhookRecord } from '../../store/webhook-store.js';
import { unwrap, type AppDeps } from '../deps.js';
import type { Route, RouteContext } from '../router.js';
import { collection } from './collection.js';
import { parseIntParam, queryInt, validate } from '../validate.js';

/** Spec 2.5, plus the envelope id receivers see as X-Vigil-Delivery and the last HTTP status. */
function deliveryView(d: DeliveryRecord) {
  return {
    id: d.id,
    event: d.event,
    status: d.status,
    attempts: d.attempts,
    next_attempt_at: d.next_attempt_at,
    last_error: d.last_error,
    created_at: d.created_at,
    delivered_at: d.delivered_at,
    envelope_id: d.envelope_id,
    last_status_code: d.last_status,
    ledger_seq: d.ledger_seq,
  };
}

/** Webhooks of the caller's org (scope admin). Another org's webhook is simply not found. */
export function webhookRoutes(deps: AppDeps): Route[] {
  const own = ({ key, params }: RouteContext): WebhookRecord => {
    const id = parseIntParam(params.webhook_id, 0, 1, Number.MAX_SAFE_INTEGER);
    const webhook = id === null ? undefined : deps.webhooks.get(key.org, id);
    if (webhook === undefined) throw new VigilError('not_found', `webhook ${params.webhook_id ?? ''} not found`);
    return webhook;
  };
  return [
    ...collection({ method: 'get', path: '/webhooks', auth: 'admin', handler: ({ key }) => ({ body: deps.webhooks.list(key.org).map(webhookView) }) }),
    ...collection({
      method: 'post',
      path: '/webhooks',
      auth: 'admin',
      handler: async ({ key, body }) => {
        const webhook = await deps.webhooks.create(key.org, validate(createWebhookBody, body));
        return { body: { ...webhookView(webhook), secret: webhook.secret } };
      },
    }),
    { method: 'get', path: '/webhooks/:webhook_id', auth: 'admin', handler: (ctx) => ({ body: webhookView(own(ctx)) }) },
    {
      method: 'del',
      path: '/webhooks/:webhook_id',
      auth: 'admin',
      handler: async (ctx) => {
        const { webhook } = await deps.webhooks.deactivate(ctx.key.org, own(ctx).id);
        await deps.deliveries.cancel(webhook);
        return { body: webhookView(webhook) };
      },
    },
    ...collection({
      method: 'get',
      path: '/webhooks/:webhook_id/deliveries',
      auth: 'admin',
      handler: (ctx) => {
        const webhook = own(ctx);
        const limit = queryInt(ctx.query, 'limit', 50, 1, 500);
        return { body: deps.webhookStore.listDeliveries(webhook.org, webhook.id, limit).map(deliveryView) };
      },
    }),
    {
      method: 'post',
      path: '/webhooks/:webhook_id/rotate-secret',
      auth: 'admin',
      handler: async (ctx) => {
        const webhook = await deps.webhooks.rotate(ctx.key.org, own(ctx).id);
        return { body: { ...webhookView(webhook), secret: webhook.secret } };
      },
    },
    {
      method: 'post',
      path: '/webhooks/:webhook_id/deliveries/:delivery_id/retry',
      auth: 'admin',
      handler: async (ctx) => {
        const webhook = own(ctx);
        const deliveryId = parseIntParam(ctx.params.delivery_id, 0, 1, Number.MAX_SAFE_INTEGER);
        if (deliveryId === null) throw new VigilError('not_found', `delivery ${ctx.params.delivery_id ?? ''} not found`);
        const retried = await deps.commands.request({ type: 'delivery.retry', org: webhook.org, webhookId: webhook.id, deliveryId });
        return { body: deliveryView(unwrap(retried)) };
      },
    },
    {
      method: 'post',
      path: '/webhooks/:webhook_id/test',
      auth: 'admin',
      handler: async (ctx) => {
        const webhook = own(ctx);
        if (!webhook.active) throw new VigilError('conflict', `webhook ${webhook.id} is deactivated`);
        return { body: await deps.deliveries.ping(webhook) };
      },
    },
  ];
}
