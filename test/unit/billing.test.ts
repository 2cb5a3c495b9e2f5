import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_PLAN,
  type LimitKey,
  MONTH,
  PLANS,
  type Plan,
  type Usage,
  formatMoney,
  monthOf,
  nextMonthStart,
  parseMoney,
  planNamed,
  statement,
} from '../../src/domain/billing.js';

const UPGRADE = 'https://vigil.example/upgrade';
const none: Usage = { events: 0, agents_active: 0, webhook_deliveries: 0, exports: 0 };
const use = (u: Partial<Usage>): Usage => ({ ...none, ...u });
const at = (iso: string): number => Date.parse(iso);

describe('plans', () => {
  it('names the three plans and defaults to free', () => {
    expect(Object.keys(PLANS)).toEqual(['free', 'team', 'scale']);
    expect(planNamed(DEFAULT_PLAN)).toBe(PLANS.free);
    for (const [name, plan] of Object.entries(PLANS)) expect(planNamed(name)).toBe(plan);
  });

  it('answers undefined for unknown names, including Object.prototype keys', () => {
    for (const name of ['', 'enterprise', 'Team', 'toString', '__proto__', 'constructor']) {
      expect(planNamed(name)).toBeUndefined();
    }
  });

  it('prices every billed limit and no blocked one, with valid money', () => {
    for (const plan of Object.values(PLANS)) {
      expect(parseMoney(plan.price)).toBeGreaterThanOrEqual(0);
      for (const key of Object.keys(plan.limits) as LimitKey[]) {
        const rate = plan.overage[key];
        if (plan.enforcement[key] === 'bill') {
          expect(rate, `${plan.name}.${key}`).toBeDefined();
          expect(Number.isSafeInteger(rate!.per) && rate!.per > 0).toBe(true);
          expect(parseMoney(rate!.unit_price)).toBeGreaterThan(0);
        } else {
          expect(rate, `${plan.name}.${key}`).toBeUndefined();
        }
      }
    }
  });

  it('holds the documented numbers', () => {
    expect(PLANS.free).toMatchObject({
      price: '0.00',
      limits: { events_per_month: 100_000, agents: 100, webhooks: 10, public_agents: 100, exports_per_month: 20 },
    });
    expect(Object.values(PLANS.free.enforcement).every((e) => e === 'block')).toBe(true);
    expect(PLANS.team).toMatchObject({
      price: '49.00',
      limits: { events_per_month: 1_000_000, agents: 1_000, webhooks: 25, public_agents: 1_000, exports_per_month: 100 },
      enforcement: { events_per_month: 'bill', agents: 'block', webhooks: 'block', public_agents: 'block', exports_per_month: 'bill' },
      overage: {
        events_per_month: { unit: '1,000 events', per: 1000, unit_price: '0.50' },
        exports_per_month: { unit: 'export', per: 1, unit_price: '1.00' },
      },
    });
    expect(PLANS.scale).toMatchObject({
      price: '499.00',
      limits: { events_per_month: 20_000_000, agents: 10_000, webhooks: 100, public_agents: 10_000, exports_per_month: 2_000 },
      enforcement: { events_per_month: 'bill', agents: 'block', webhooks: 'block', public_agents: 'block', exports_per_month: 'bill' },
      overage: {
        events_per_month: { unit: '1,000 events', per: 1000, unit_price: '0.20' },
        exports_per_month: { unit: 'export', per: 1, unit_price: '0.50' },
      },
    });
  });

  it('is frozen all the way down', () => {
    expect(Object.isFrozen(PLANS)).toBe(true);
    expect(Object.isFrozen(PLANS.team.limits)).toBe(true);
    expect(Object.isFrozen(PLANS.team.overage.events_per_month)).toBe(true);
    expect(() => {
      (PLANS.team.limits as { agents: number }).agents = 1;
    }).toThrow(TypeError);
  });
});

describe('statement', () => {
  it('bills team overage: partial thousands round up', () => {
    const s = statement('acme', '2026-03', PLANS.team, use({ events: 1_234_567, exports: 103, agents_active: 70 }), UPGRADE);
    expect(s).toEqual({
      org: 'acme',
      month: '2026-03',
      plan: 'team',
      limits: PLANS.team.limits,
      usage: { events: 1_234_567, agents_active: 70, webhook_deliveries: 0, exports: 103 },
      plan_price: '49.00',
      overage: [
        // 234_567 excess → 235 blocks × 0.50
        { item: 'events', quantity: 235, unit: '1,000 events', unit_price: '0.50', amount: '117.50' },
        // 3 excess × 1.00
        { item: 'exports', quantity: 3, unit: 'export', unit_price: '1.00', amount: '3.00' },
      ],
      total: '169.50', // 49.00 + 117.50 + 3.00
      currency: 'USD',
      upgrade: UPGRADE,
    });
  });

  it('matches the team events-only example (total 166.50)', () => {
    const s = statement('acme', '2026-03', PLANS.team, use({ events: 1_234_567 }), UPGRADE);
    expect(s.overage).toHaveLength(1);
    expect(s.overage[0]?.amount).toBe('117.50');
    expect(s.total).toBe('166.50');
  });

  it('bills nothing at exactly the limit, one block at one past it', () => {
    const atLimit = statement('o', '2026-03', PLANS.team, use({ events: 1_000_000, exports: 100 }), UPGRADE);
    expect(atLimit.overage).toEqual([]);
    expect(atLimit.total).toBe('49.00');
    const onePast = statement('o', '2026-03', PLANS.team, use({ events: 1_000_001, exports: 101 }), UPGRADE);
    expect(onePast.overage.map((l) => [l.quantity, l.amount])).toEqual([
      [1, '0.50'],
      [1, '1.00'],
    ]);
    expect(onePast.total).toBe('50.50');
    const wholeBlock = statement('o', '2026-03', PLANS.team, use({ events: 1_002_000 }), UPGRADE);
    expect(wholeBlock.overage[0]?.amount).toBe('1.00'); // exactly 2 blocks, no rounding
  });

  it('bills scale at its own rates', () => {
    const s = statement('big', '2026-12', PLANS.scale, use({ events: 25_000_001, exports: 2_013 }), UPGRADE);
    expect(s.overage).toEqual([
      // 5_000_001 excess → 5_001 blocks × 0.20 = 1000.20
      { item: 'events', quantity: 5_001, unit: '1,000 events', unit_price: '0.20', amount: '1000.20' },
      // 13 × 0.50
      { item: 'exports', quantity: 13, unit: 'export', unit_price: '0.50', amount: '6.50' },
    ]);
    expect(s.plan_price).toBe('499.00');
    expect(s.total).toBe('1505.70'); // 499.00 + 1000.20 + 6.50
  });

  it('never bills free, whatever the usage', () => {
    const s = statement('f', '2026-01', PLANS.free, use({ events: 9_999_999, exports: 500, agents_active: 99, webhook_deliveries: 1e6 }), UPGRADE);
    expect(s.overage).toEqual([]);
    expect(s.total).toBe('0.00');
    expect(s.usage.events).toBe(9_999_999);
  });

  it('does not bill agents or webhook deliveries even on a plan that bills', () => {
    const s = statement('o', '2026-03', PLANS.team, use({ agents_active: 5_000, webhook_deliveries: 10_000_000 }), UPGRADE);
    expect(s.overage).toEqual([]);
    expect(s.total).toBe('49.00');
  });

  it('gives zeros and the plan price for a month without usage', () => {
    for (const plan of Object.values(PLANS)) {
      const s = statement('o', '2025-02', plan, none, UPGRADE);
      expect(s.usage).toEqual(none);
      expect(s.overage).toEqual([]);
      expect(s.total).toBe(plan.price);
      expect(s.plan_price).toBe(plan.price);
    }
  });

  it('bills nothing for a month before the org existed; its creation month and later in full', () => {
    const heavy = use({ events: 5_000_000, exports: 500, agents_active: 3 });
    const before = statement('o', '2026-02', PLANS.team, heavy, UPGRADE, '2026-03');
    expect(before).toMatchObject({ month: '2026-02', plan: 'team', plan_price: '0.00', overage: [], total: '0.00', usage: heavy });
    expect(statement('o', '2025-12', PLANS.scale, none, UPGRADE, '2026-01')).toMatchObject({ plan_price: '0.00', total: '0.00' });
    const created = statement('o', '2026-03', PLANS.team, heavy, UPGRADE, '2026-03');
    expect(created).toEqual(statement('o', '2026-03', PLANS.team, heavy, UPGRADE));
    expect(created.plan_price).toBe('49.00');
    expect(statement('o', '2027-01', PLANS.team, none, UPGRADE, '2026-03').total).toBe('49.00');
    expect(() => statement('o', '2026-03', PLANS.team, none, UPGRADE, '2026-3')).toThrow(RangeError);
  });

  it('returns copies, not the frozen plan objects or the caller usage', () => {
    const usage = use({ events: 3 });
    const s = statement('o', '2026-03', PLANS.team, usage, UPGRADE);
    expect(s.limits).not.toBe(PLANS.team.limits);
    expect(s.usage).not.toBe(usage);
  });

  it('refuses broken input', () => {
    expect(() => statement('o', '2026-13', PLANS.team, none, UPGRADE)).toThrow(RangeError);
    expect(() => statement('o', '2026-3', PLANS.team, none, UPGRADE)).toThrow(RangeError);
    expect(() => statement('o', '2026-03', PLANS.team, use({ events: -1 }), UPGRADE)).toThrow(RangeError);
    expect(() => statement('o', '2026-03', PLANS.team, use({ exports: 1.5 }), UPGRADE)).toThrow(RangeError);
    const unpriced: Plan = { ...PLANS.team, overage: {} };
    expect(() => statement('o', '2026-03', unpriced, use({ events: 2_000_000 }), UPGRADE)).toThrow(/no overage price/);
    // Under the limit the missing price is never needed.
    expect(statement('o', '2026-03', unpriced, none, UPGRADE).total).toBe('49.00');
  });

  it('refuses a total that would leave safe integers instead of rounding it', () => {
    const pricey: Plan = { ...PLANS.team, overage: { ...PLANS.team.overage, events_per_month: { unit: 'event', per: 1, unit_price: '1000000.00' } } };
    expect(() => statement('o', '2026-03', pricey, use({ events: 2 ** 50 }), UPGRADE)).toThrow(RangeError);
  });
});

describe('money', () => {
  it('parses decimal strings to cents', () => {
    expect(parseMoney('49.00')).toBe(4900);
    expect(parseMoney('0.5')).toBe(50);
    expect(parseMoney('0.05')).toBe(5);
    expect(parseMoney('7')).toBe(700);
    expect(parseMoney('0')).toBe(0);
    expect(parseMoney('90071992547409.91')).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('refuses more than two decimals, negatives and garbage', () => {
    const bad = ['0.001', '1.999', '-1.00', '+1.00', '', ' 1.00', '1.00 ', '1.', '.5', '1e3', '0x10', '1,000.00', 'NaN', 'Infinity', '１.00', '90071992547409.92'];
    for (const s of bad) expect(() => parseMoney(s), JSON.stringify(s)).toThrow(RangeError);
    expect(() => parseMoney(12 as unknown as string)).toThrow(RangeError);
  });

  it('formats cents as decimal strings', () => {
    expect(formatMoney(4900)).toBe('49.00');
    expect(formatMoney(5)).toBe('0.05');
    expect(formatMoney(50)).toBe('0.50');
    expect(formatMoney(0)).toBe('0.00');
    expect(formatMoney(123_456_789)).toBe('1234567.89');
    expect(formatMoney(Number.MAX_SAFE_INTEGER)).toBe('90071992547409.91');
  });

  it('refuses to format negatives, fractions and unsafe numbers', () => {
    for (const n of [-1, 0.5, Number.MAX_SAFE_INTEGER + 1, Number.NaN, Infinity]) {
      expect(() => formatMoney(n), String(n)).toThrow(RangeError);
    }
  });

  it('round-trips every safe non-negative integer', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (n) => {
        expect(formatMoney(parseMoney(formatMoney(n)))).toBe(formatMoney(n));
        expect(parseMoney(formatMoney(n))).toBe(n);
      }),
    );
  });
});

describe('months', () => {
  const originalTz = process.env.TZ;
  afterEach(() => {
    if (originalTz === undefined) delete process.env.TZ;
    else process.env.TZ = originalTz;
  });

  it('takes the UTC month at the last millisecond and the next start', () => {
    const t = at('2026-01-31T23:59:59.999Z');
    expect(monthOf(t)).toBe('2026-01');
    expect(nextMonthStart(t)).toBe(at('2026-02-01T00:00:00.000Z'));
    expect(monthOf(t + 1)).toBe('2026-02');
    expect(nextMonthStart(t + 1)).toBe(at('2026-03-01T00:00:00.000Z'));
  });

  it('rolls December into the next year', () => {
    expect(monthOf(at('2025-12-15T12:00:00Z'))).toBe('2025-12');
    expect(nextMonthStart(at('2025-12-31T23:59:59.999Z'))).toBe(at('2026-01-01T00:00:00Z'));
    expect(nextMonthStart(at('2025-12-01T00:00:00Z'))).toBe(at('2026-01-01T00:00:00Z'));
  });

  it('handles leap February and years below 100', () => {
    expect(nextMonthStart(at('2028-02-29T10:00:00Z'))).toBe(at('2028-03-01T00:00:00Z'));
    const y50 = at('0050-12-10T00:00:00Z');
    expect(monthOf(y50)).toBe('0050-12');
    expect(nextMonthStart(y50)).toBe(at('0051-01-01T00:00:00Z'));
  });

  it('gives MONTH-shaped answers and a strictly later start in the following month', () => {
    const lo = at('1970-01-01T00:00:00Z');
    const hi = at('9999-11-30T23:59:59.999Z');
    fc.assert(
      fc.property(fc.integer({ min: lo, max: hi }), (t) => {
        const m = monthOf(t);
        expect(m).toMatch(MONTH);
        const next = nextMonthStart(t);
        expect(next).toBeGreaterThan(t);
        expect(monthOf(next)).not.toBe(m);
        expect(monthOf(next - 1)).toBe(m);
        expect(new Date(next).toISOString()).toMatch(/-01T00:00:00\.000Z$/);
      }),
    );
  });

  it('does not depend on the local time zone', () => {
    const t = at('2026-01-31T23:30:00Z');
    const seen = new Set<number>();
    for (const tz of ['UTC', 'Pacific/Kiritimati', 'America/Los_Angeles', 'Asia/Kolkata']) {
      process.env.TZ = tz;
      seen.add(new Date(t).getHours());
      expect(monthOf(t)).toBe('2026-01');
      expect(nextMonthStart(t)).toBe(at('2026-02-01T00:00:00Z'));
    }
    // The zones really applied: local hours differed, so the test is not vacuous.
    expect(seen.size).toBeGreaterThan(1);
  });

  it('refuses instants it cannot name', () => {
    expect(() => monthOf(Number.NaN)).toThrow(RangeError);
    expect(() => nextMonthStart(Infinity)).toThrow(RangeError);
    expect(() => monthOf(at('+010000-01-01T00:00:00Z'))).toThrow(RangeError);
  });

  it('MONTH accepts only YYYY-MM', () => {
    for (const ok of ['2026-01', '2026-12', '0000-09']) expect(ok).toMatch(MONTH);
    for (const bad of ['2026-00', '2026-13', '2026-1', '26-01', '2026-01-01', ' 2026-01', '2026-01\n']) {
      expect(bad).not.toMatch(MONTH);
    }
  });
});
