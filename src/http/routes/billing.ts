import { MONTH, monthOf, statement } from '../../domain/billing.js';
import { VigilError } from '../../errors.js';
import type { AppDeps } from '../deps.js';
import { PAGE_HEADERS } from '../pages/html.js';
import { pricingPage } from '../pages/pricing-page.js';
import type { Route } from '../router.js';

/** The org's creation month, from its record's created_at; undefined when unknown (then every month is billed). */
function firstMonth(createdAt: string | undefined): string | undefined {
  const ms = createdAt === undefined ? NaN : Date.parse(createdAt);
  return Number.isFinite(ms) ? monthOf(ms) : undefined;
}

/** Plan and monthly statements (any key of the org), and the public pricing page. */
export function billingRoutes(deps: AppDeps): Route[] {
  const upgrade = `${deps.config.appUrl}/pricing`;
  const page = pricingPage();
  return [
    {
      method: 'get',
      path: '/billing/plan',
      auth: 'key',
      handler: ({ key }) => {
        const plan = deps.registry.planOf(key.org);
        return {
          body: {
            org: key.org,
            plan: plan.name,
            limits: plan.limits,
            billing_email: deps.registry.getOrg(key.org)?.billing_email ?? null,
            plan_price: plan.price,
            currency: plan.currency,
            upgrade,
          },
        };
      },
    },
    {
      method: 'get',
      path: '/billing/statement',
      auth: 'key',
      handler: ({ key, query }) => {
        const current = monthOf(deps.now());
        const month = query.get('month') ?? current;
        if (!MONTH.test(month)) {
          throw new VigilError('validation_failed', 'invalid query: month', [{ path: 'month', message: 'a UTC calendar month as YYYY-MM (default: the current month)' }]);
        }
        if (month > current) {
          throw new VigilError('validation_failed', 'invalid query: month', [{ path: 'month', message: `${month} has not begun; the current month (UTC) is ${current}` }]);
        }
        const metered = deps.meter.usage(key.org, month);
        const usage = { ...metered, webhook_deliveries: deps.webhookStore.countDeliveries(key.org, month) };
        return { body: statement(key.org, month, deps.registry.planOf(key.org), usage, upgrade, firstMonth(deps.registry.getOrg(key.org)?.created_at)) };
      },
    },
    {
      method: 'get',
      path: '/pricing',
      auth: 'none',
      handler: () => ({ text: page, contentType: 'text/html; charset=utf-8', headers: { ...PAGE_HEADERS, 'cache-control': 'public, max-age=300' } }),
    },
  ];
}
