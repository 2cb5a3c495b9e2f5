/**
 * Billing plans, money and the monthly statement (spec 2.7, 2.8, 4.6).
 * Pure: no clock, no I/O. Money is a decimal string at the edges and integer minor units (cents)
 * inside, checked to stay safe integers; a float never holds money. Malformed input is a broken
 * invariant (the HTTP edge validates first) and throws `RangeError`.
 */
import type { WriterLimits } from './org-state.js';

export interface PlanLimits {
  events_per_month: number;
  agents: number;
  webhooks: number;
  public_agents: number;
  exports_per_month: number;
}
export type LimitKey = keyof PlanLimits;
/** What happens past a limit: `block` refuses the action with a clear error; `bill` lets it through and bills overage. */
export type Enforcement = 'block' | 'bill';
export interface Plan {
  name: string;
  price: string; // monthly price, decimal string e.g. "49.00"
  currency: 'USD';
  limits: PlanLimits;
  enforcement: Record<LimitKey, Enforcement>;
  /** Overage unit prices for limits enforced by `bill`: per `unit` (e.g. 1,000 events). */
  overage: Partial<Record<LimitKey, { unit: string; per: number; unit_price: string }>>;
}

export interface Usage {
  events: number;
  agents_active: number;
  webhook_deliveries: number;
  exports: number;
}
export interface OverageLine {
  item: string;
  quantity: number;
  unit: string;
  unit_price: string | null;
  amount: string | null;
}
export interface Statement {
  org: string;
  month: string;
  plan: string;
  limits: PlanLimits;
  usage: Usage;
  plan_price: string | null;
  overage: OverageLine[];
  total: string | null;
  currency: string;
  upgrade: string;
}

export const MONTH = /^\d{4}-(0[1-9]|1[0-2])$/;

/*
 * Plan numbers. Prices are example data, meant to change; the shape is what code relies on.
 * - free:  evaluation and small deployments: 100k events a month, room for a hundred agents and
 *          public pages; every limit blocks, so free never bills.
 * - team:  a production team: 1M events and 100 exports with pay-as-you-go overage so traffic
 *          spikes are never dropped; agents, webhooks and public agents block (counts, not traffic).
 * - scale: 20× team's events at a lower overage rate (volume discount), room for a fleet of
 *          10,000 agents, exports billed at half the team rate.
 */
const block = (): Record<LimitKey, Enforcement> => ({
  events_per_month: 'block',
  agents: 'block',
  webhooks: 'block',
  public_agents: 'block',
  exports_per_month: 'block',
});
const EVENTS_OVERAGE = { unit: '1,000 events', per: 1_000 } as const;
const EXPORT_OVERAGE = { unit: 'export', per: 1 } as const;

export const PLANS: Readonly<Record<'free' | 'team' | 'scale', Plan>> = deepFreeze({
  free: {
    name: 'free',
    price: '0.00',
    currency: 'USD',
    limits: { events_per_month: 100_000, agents: 100, webhooks: 10, public_agents: 100, exports_per_month: 20 },
    enforcement: block(),
    overage: {},
  },
  team: {
    name: 'team',
    price: '49.00',
    currency: 'USD',
    limits: { events_per_month: 1_000_000, agents: 1_000, webhooks: 25, public_agents: 1_000, exports_per_month: 100 },
    enforcement: { ...block(), events_per_month: 'bill', exports_per_month: 'bill' },
    overage: {
      events_per_month: { ...EVENTS_OVERAGE, unit_price: '0.50' },
      exports_per_month: { ...EXPORT_OVERAGE, unit_price: '1.00' },
    },
  },
  scale: {
    name: 'scale',
    price: '499.00',
    currency: 'USD',
    limits: {
      events_per_month: 20_000_000,
      agents: 10_000,
      webhooks: 100,
      public_agents: 10_000,
      exports_per_month: 2_000,
    },
    enforcement: { ...block(), events_per_month: 'bill', exports_per_month: 'bill' },
    overage: {
      events_per_month: { ...EVENTS_OVERAGE, unit_price: '0.20' },
      exports_per_month: { ...EXPORT_OVERAGE, unit_price: '0.50' },
    },
  },
});
export const DEFAULT_PLAN = 'free';

export function planNamed(name: string): Plan | undefined {
  return Object.hasOwn(PLANS, name) ? PLANS[name as keyof typeof PLANS] : undefined;
}

/**
 * Limits measured by the monthly meter, with the usage key that counts them. Only these can bill:
 * agents, webhooks and public agents are counts checked when one is created, not monthly traffic.
 */
const METERED: ReadonlyArray<readonly [LimitKey, keyof Usage]> = [
  ['events_per_month', 'events'],
  ['exports_per_month', 'exports'],
];

/**
 * The monthly statement (spec 2.8) against `plan` (the plan in force now). A month before
 * `firstMonth` (the org's creation month, when known) bills nothing: its statement shows the usage
 * and limits with a plan price and total of 0.00. The creation month itself is billed whole.
 */
export function statement(org: string, month: string, plan: Plan, usage: Usage, upgradeUrl: string, firstMonth?: string): Statement {
  if (!MONTH.test(month)) throw new RangeError(`month must be YYYY-MM, got ${JSON.stringify(month)}`);
  if (firstMonth !== undefined && !MONTH.test(firstMonth)) throw new RangeError(`firstMonth must be YYYY-MM, got ${JSON.stringify(firstMonth)}`);
  for (const [key, count] of Object.entries(usage) as [string, number][]) assertCount(`usage.${key}`, count);
  // YYYY-MM strings order as the months do.
  const billed = firstMonth === undefined || month >= firstMonth;
  const price = billed ? parseMoney(plan.price) : 0;
  const overage: OverageLine[] = [];
  let total = price;
  for (const [limit, item] of METERED) {
    if (!billed) break;
    if (plan.enforcement[limit] !== 'bill') continue;
    const excess = usage[item] - plan.limits[limit];
    if (excess <= 0) continue;
    const rate = plan.overage[limit];
    // A plan that bills a limit without pricing it is broken data, not an unknown amount.
    if (rate === undefined) throw new RangeError(`plan ${plan.name} bills ${limit} but has no overage price`);
    if (!Number.isSafeInteger(rate.per) || rate.per < 1) throw new RangeError(`plan ${plan.name}: bad ${limit} per`);
    // Quantity in the line's own unit (started units count), so quantity × unit_price = amount.
    const quantity = ceilDiv(excess, rate.per);
    const amount = safeMinor(quantity * parseMoney(rate.unit_price));
    total = safeMinor(total + amount);
    overage.push({
      item,
      quantity,
      unit: rate.unit,
      unit_price: rate.unit_price,
      amount: formatMoney(amount),
    });
  }
  return {
    org,
    month,
    plan: plan.name,
    limits: { ...plan.limits },
    usage: { ...usage },
    plan_price: formatMoney(price),
    overage,
    total: formatMoney(total),
    currency: plan.currency,
    upgrade: upgradeUrl,
  };
}

const MONEY = /^(\d+)(?:\.(\d{1,2}))?$/;

/** "49.00" → 4900, "0.5" → 50, "7" → 700. Refuses more than two decimals, signs, exponents, spaces. */
export function parseMoney(decimal: string): number {
  const m = typeof decimal === 'string' ? MONEY.exec(decimal) : null;
  if (m === null) throw new RangeError(`not a money amount: ${JSON.stringify(decimal)}`);
  // BigInt so a huge whole part is refused rather than silently rounded.
  const minor = BigInt(m[1]!) * 100n + BigInt((m[2] ?? '').padEnd(2, '0'));
  if (minor > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`money amount too large: ${decimal}`);
  return Number(minor);
}

/** 4900 → "49.00", 5 → "0.05". Only non-negative safe integers. */
export function formatMoney(minor: number): string {
  safeMinor(minor);
  const digits = String(minor).padStart(3, '0');
  return `${digits.slice(0, -2)}.${digits.slice(-2)}`;
}

/** "YYYY-MM" of a UTC instant (ms). */
export function monthOf(ms: number): string {
  const d = utcDate(ms);
  return `${String(d.getUTCFullYear()).padStart(4, '0')}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** UTC start of the month after the one holding `ms`, in ms: the Retry-After horizon of a monthly quota. */
export function nextMonthStart(ms: number): number {
  const d = utcDate(ms);
  const next = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC maps years 0–99 to 1900–1999. Month 12 rolls into next year.
  next.setUTCFullYear(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  return next.getTime();
}

function utcDate(ms: number): Date {
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  // NaN fails the range check too; MONTH has room for four-digit years only.
  if (!(year >= 0 && year <= 9999)) throw new RangeError(`instant outside years 0000–9999: ${ms}`);
  return d;
}

function ceilDiv(a: number, b: number): number {
  // Exact for safe integers: a fractional part r/b ≥ 1/b survives rounding unless a > 2^53.
  return Math.ceil(a / b);
}

function safeMinor(minor: number): number {
  if (!Number.isSafeInteger(minor) || minor < 0) {
    throw new RangeError(`money in minor units must be a non-negative safe integer, got ${minor}`);
  }
  return minor;
}

function assertCount(what: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${what} must be a non-negative safe integer, got ${n}`);
}

function deepFreeze<T extends object>(value: T): T {
  for (const v of Object.values(value)) if (typeof v === 'object' && v !== null) deepFreeze(v);
  return Object.freeze(value);
}

/** The limit a plan enforces by refusing, or null when it bills (or has none). */
export function blockingLimit(plan: Plan, key: LimitKey): number | null {
  return plan.enforcement[key] === 'block' ? plan.limits[key] : null;
}

/** The limits an org's writer applies under `plan` at `nowMs` (read once per batch). */
export function writerLimits(plan: Plan, nowMs: number): WriterLimits {
  return {
    plan: plan.name,
    eventsPerMonth: blockingLimit(plan, 'events_per_month'),
    exportsPerMonth: blockingLimit(plan, 'exports_per_month'),
    agents: blockingLimit(plan, 'agents'),
    publicAgents: blockingLimit(plan, 'public_agents'),
    untilNextMonth: Math.ceil((nextMonthStart(nowMs) - nowMs) / 1000),
  };
}
