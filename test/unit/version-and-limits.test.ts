import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PLANS, writerLimits } from '../../src/domain/billing.js';
import { webhookDataOf, webhookEventOf } from '../../src/domain/webhook.js';
import type { LedgerRecord } from '../../src/domain/records.js';
import { VERSION } from '../../src/version.js';

describe('one version', () => {
  it('package.json says the version the service reports', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(pkg.version).toBe(VERSION);
  });
});

describe('writerLimits', () => {
  it('takes the limits a plan enforces by refusing, and the seconds to the next UTC month', () => {
    const nowMs = Date.parse('2026-11-30T23:59:00.000Z');
    const free = writerLimits(PLANS.free, nowMs);
    expect(free.plan).toBe('free');
    expect(free.untilNextMonth).toBe(60);
    expect(free.eventsPerMonth).toBe(PLANS.free.enforcement.events_per_month === 'block' ? PLANS.free.limits.events_per_month : null);
    const scale = writerLimits(PLANS.scale, nowMs);
    for (const key of ['eventsPerMonth', 'exportsPerMonth', 'agents', 'publicAgents'] as const) {
      expect(scale[key] === null || typeof scale[key] === 'number').toBe(true);
    }
  });
});

describe('webhook events of records', () => {
  /** A record of agent `a` with only the fields these functions read (hence the cast). */
  const row = (kind: string, body: Record<string, unknown>) => ({ kind, recordedAt: '2026-11-23T00:00:00.000Z', agentId: 'a', body }) as unknown as LedgerRecord;
  it('names gate events that hold and review decisions, nothing else', () => {
    expect(webhookEventOf(row('event', { gate_status: 'pass' }))).toBeNull();
    expect(webhookEventOf(row('event', { gate_status: 'alert' }))).toBe('gate.alert');
    expect(webhookEventOf(row('review', { outcome: 'released' }))).toBe('review.released');
    expect(webhookEventOf(row('agent', { agent_id: 'a' }))).toBeNull();
  });
  it('gives review events the note as reason, with outcome, reviewer and held gate', () => {
    const data = webhookDataOf(row('review', { action_id: 3, event_id: 3, outcome: 'rejected', note: 'no', reviewer: 'r', held_gate: 'hold', gate_status: 'hold', bii: 0.6 }), 1, 'd');
    expect(data).toEqual({ agent_id: 'a', action_id: 3, event_id: 3, gate_status: 'hold', bii: 0.6, reason: 'no', policy_digest: 'd', ledger_seq: 1, outcome: 'rejected', reviewer: 'r', held_gate: 'hold' });
  });
});
