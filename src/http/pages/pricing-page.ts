import { PLANS, type LimitKey, type Plan } from '../../domain/billing.js';
import { esc, layout } from './html.js';

const LIMITS: [LimitKey, string][] = [
  ['events_per_month', 'events a month'],
  ['agents', 'active agents'],
  ['webhooks', 'active webhooks'],
  ['public_agents', 'public agents'],
  ['exports_per_month', 'export bundles a month'],
];

function cell(plan: Plan, key: LimitKey): string {
  const limit = plan.limits[key].toLocaleString('en-US');
  const over = plan.overage[key];
  return plan.enforcement[key] === 'block' ? `${limit}, then refused` : `${limit}, then ${esc(over?.unit_price)} ${esc(plan.currency)} per ${esc(over?.unit)}`;
}

/** The plans and how an operator changes one (the `upgrade` address of billing answers). */
export function pricingPage(): string {
  const plans = Object.values(PLANS);
  const head = plans.map((p) => `<th>${esc(p.name)}<br>${esc(p.price)} ${esc(p.currency)} a month</th>`).join('');
  const rows = LIMITS.map(([key, label]) => `<tr><td>${esc(label)}</td>${plans.map((p) => `<td>${cell(p, key)}</td>`).join('')}</tr>`).join('\n');
  return layout(
    'Vigil plans',
    `<h1>Plans</h1>
<table><thead><tr><th></th>${head}</tr></thead>
<tbody>
${rows}
</tbody></table>
<p>"Refused" limits answer with a clear error (403 <code>plan_limit</code> for counts, 429
<code>quota_exceeded</code> with <code>Retry-After</code> until the next UTC month for monthly quotas);
the others are billed as overage on the monthly statement.</p>
<h2>Changing plan</h2>
<p>The operator of this Vigil installation sets an organization's plan:</p>
<pre>npm run vigil -- orgs set-plan --org &lt;slug&gt; --plan &lt;${plans.map((p) => esc(p.name)).join('|')}&gt; [--billing-email &lt;address&gt;]</pre>
<p>The new plan applies at once; statements are computed against the plan in force when they are read.</p>`,
  );
}
