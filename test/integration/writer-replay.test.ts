import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrgLedgerActor, type OrgActorOptions } from '../../src/actors/org-ledger-actor.js';
import { OrgRecovery, type WriterSnapshot } from '../../src/actors/org-recovery.js';
import type { LedgerLog } from '../../src/bus/ledger-log.js';
import type { LedgerCommand, OrgReply } from '../../src/bus/messages.js';
import type { PublicLink } from '../../src/domain/agent-record.js';
import { PLANS, writerLimits } from '../../src/domain/billing.js';
import { NO_LIMITS, type WriterLimits } from '../../src/domain/org-state.js';
import { POLICY_V1, policyDigest } from '../../src/domain/policy.js';
import { EventType } from '../../src/domain/scoring.js';
import { ReviewOutcome, type ReviewDecisionBody } from '../../src/domain/schemas.js';
import { nativeSha256Rows } from '../../src/store/batch-hash.js';
import { openLmdb, type LmdbStores } from '../../src/store/lmdb.js';
import { LmdbLedgerLog } from '../../src/store/lmdb-ledger-log.js';
import { opaqueLog } from '../support/opaque-log.js';
import { silentLogger } from '../support/logs.js';
import { removeDir, tempDir } from '../support/server.js';

// Issue 14, item 4: the writer applies each record it decides with the `evolve` a replay folds
// the ledger with. Property: whatever the commands, the state the writer holds is the state
// recovered from the rows it wrote.

const DAY = 86_400_000;

/** Limits small enough to be met within a short run, through the same writerLimits as a real plan. */
const TINY = { ...PLANS.free, name: 'tiny', limits: { events_per_month: 4, agents: 2, webhooks: 1, public_agents: 1, exports_per_month: 1 } };
const LIMITS: Record<string, (nowMs: number) => WriterLimits> = {
  none: () => NO_LIMITS,
  free: (nowMs) => writerLimits(PLANS.free, nowMs),
  tiny: (nowMs) => writerLimits(TINY, nowMs),
};

// -0 is left out: JSON reads it back as 0, and a writer that scored an evaluation of -0 keeps -0 as
// the mean (equal in every decision, but not to toEqual).
const unit = fc.double({ min: 0, max: 1, noNaN: true }).map((x) => x + 0);

/** Payloads that give each kind of signal: clean, secret reads, oversight writes, file and monitoring changes, scores. */
const payload = fc.oneof(
  fc.constant({}),
  fc.record({ key: fc.constantFrom('ui.theme', 'db.password', 'oversight.level') }),
  fc.record({ operation: fc.constantFrom('read', 'write', 'delete'), path: fc.constantFrom('/workspace/a.ts', '/etc/passwd', '/var/log/app.log'), workspace: fc.constant('/workspace') }),
  fc.record({ enabled: fc.boolean() }),
  fc.record({ state: fc.constantFrom('on', 'off', 'paused') }),
  fc.record({ score: fc.oneof(unit, fc.integer({ min: 0, max: 100 })) }),
);

const agent = fc.constantFrom('a', 'b', 'c', 'ghost');

const changes = fc.oneof(
  { weight: 3, arbitrary: fc.record({ public: fc.constant(true) }) },
  { weight: 3, arbitrary: fc.record({ public: fc.boolean(), name: fc.constantFrom('Renamed', 'Other'), observed: fc.boolean() }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: fc.record({ public: fc.constant(true), public_links: fc.constant<PublicLink[]>([{ kind: 'website', url: 'https://example.com' }]) }) },
  { weight: 1, arbitrary: fc.record({ is_active: fc.boolean() }) },
);

const decision = fc.record({ outcome: fc.constantFrom(...ReviewOutcome), note: fc.string({ maxLength: 8 }) });

/** A decision on an action the run saw held (the `pick`-th, cycling; decided or not), made an LedgerCommand when sent. */
interface HeldReview {
  type: 'review.held';
  pick: number;
  decision: ReviewDecisionBody;
}

/** A command without its org (set per run). */
const command: fc.Arbitrary<LedgerCommand | HeldReview> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ type: fc.constant('review.held' as const), pick: fc.nat(), decision }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('agent.register' as const), org: fc.constant(''), agent: fc.record({ agent_id: agent, name: fc.constant('Agent'), kind: fc.constantFrom('production' as const, 'sandbox' as const), observed: fc.boolean() }) }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('agent.update' as const), org: fc.constant(''), agentId: agent, changes }) },
  {
    weight: 6,
    arbitrary: fc.record({
      type: fc.constant('event.ingest' as const),
      org: fc.constant(''),
      event: fc.record({ agent_id: agent, event_type: fc.constantFrom(...EventType), payload, dti: fc.option(unit, { nil: null }), source: fc.constant('self' as const), actor: fc.option(fc.constant('ops@example.com'), { nil: null }) }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ type: fc.constant('review.decide' as const), org: fc.constant(''), actionId: fc.integer({ min: 1, max: 30 }), decision, reviewer: fc.constant('key:r') }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('export.record' as const),
      org: fc.constant(''),
      export: fc.record({ manifest_sha256: fc.constant('ab'.repeat(32)), since_seq: fc.nat(5), until_seq: fc.integer({ min: 6, max: 9 }), files: fc.constant<string[]>(['ledger.jsonl', 'manifest.json']), agents: fc.option(fc.constant<string[]>(['a']), { nil: null }) }),
    }),
  },
);

/** Commands sent in one event-loop turn (one batch, one recorded time), after the clock moved by `advance`. */
const step = fc.record({
  advance: fc.constantFrom(0, 1, 999, 60_000, DAY, 31 * DAY, -5_000),
  commands: fc.array(command, { minLength: 1, maxLength: 4 }),
});

/** Agents `a` and `b` are registered first (in one batch), so most runs have events to review. */
const registered = (agent_id: string): LedgerCommand | HeldReview => ({ type: 'agent.register', org: '', agent: { agent_id, name: agent_id, kind: 'production', observed: true } });

const run = fc.record({
  start: fc.constantFrom(Date.UTC(2026, 0, 31, 23, 59, 58), Date.UTC(2026, 1, 28, 12), Date.UTC(2026, 5, 15)),
  limits: fc.constantFrom(...Object.keys(LIMITS)),
  steps: fc.array(step, { minLength: 1, maxLength: 16 }).map((steps) => [{ advance: 0, commands: [registered('a'), registered('b')] }, ...steps]),
});

type Run = typeof run extends fc.Arbitrary<infer R> ? R : never;

/** A run written out that meets every path the property must see (random runs meet them only by chance). */
const EVERY_PATH: Run = (() => {
  const ingest = (agent_id: string, payload: Record<string, unknown> = {}, dti: number | null = null): LedgerCommand => ({
    type: 'event.ingest',
    org: '',
    event: { agent_id, event_type: 'monitoring_state_change', payload, dti, source: 'self', actor: null },
  });
  const update = (agentId: string, changes: Record<string, unknown>): LedgerCommand => ({ type: 'agent.update', org: '', agentId, changes });
  const held = (pick: number, outcome: ReviewDecisionBody['outcome']): HeldReview => ({ type: 'review.held', pick, decision: { outcome, note: '' } });
  const exported: LedgerCommand = { type: 'export.record', org: '', export: { manifest_sha256: 'ab'.repeat(32), since_seq: 0, until_seq: 2, files: [], agents: null } };
  return {
    start: Date.UTC(2026, 0, 31, 23, 0),
    limits: 'tiny',
    steps: [
      { advance: 0, commands: [registered('a'), registered('b')] },
      { advance: 1, commands: [registered('c'), registered('a'), update('ghost', { name: 'G' }), update('a', { public: true }), update('b', { public: true })] },
      { advance: 1, commands: [ingest('a', { enabled: false }), ingest('a', { enabled: false }, 0.9), ingest('ghost')] },
      { advance: 1, commands: [held(0, 'escalated'), held(1, 'released'), { type: 'review.decide', org: '', actionId: 99, decision: { outcome: 'rejected', note: '' }, reviewer: 'key:r' }] },
      { advance: 1, commands: [held(1, 'rejected'), held(0, 'rejected'), update('b', { is_active: false })] },
      { advance: 1, commands: [ingest('b'), ingest('a', { enabled: true }), ingest('a'), ingest('a'), exported, exported] },
      { advance: 31 * DAY, commands: [ingest('a'), exported, update('b', { name: 'B' })] },
    ],
  };
})();

let dir: string;
let store: LmdbStores;
let bus: LedgerLog;

beforeAll(() => {
  dir = tempDir('vigil-writer-replay-');
  store = openLmdb(dir);
  bus = new LmdbLedgerLog(store.ledger, silentLogger());
});
afterAll(async () => {
  await bus.close();
  await store.close();
  removeDir(dir);
});

/** The snapshot less the writer's clock floor: a batch whose commands were all refused moves it and writes no row. */
const comparable = (s: WriterSnapshot) => ({ ...s, head: Buffer.from(s.head).toString('hex'), lastMs: undefined });

describe('the org writer and a replay of what it wrote', () => {
  it.each(['LMDB, pipelined appends', 'LMDB, pipelined appends, batches of at most 2', 'remote-like: no capabilities, opaque fences'])('property (%s): for any commands, the writer holds the state recovered from its rows', async (kind) => {
    const log = kind.startsWith('LMDB') ? bus : opaqueLog(bus);
    /** What the runs met, so the property is known to have exercised each path. */
    const seen = new Set<string>();
    let runs = 0;
    let clock = 0;
    let limitsOf = LIMITS.none!;
    const options: OrgActorOptions = {
      policy: POLICY_V1,
      policyDigest: policyDigest(POLICY_V1),
      now: () => clock,
      sha256Rows: nativeSha256Rows,
      maxPending: 1000,
      log: silentLogger(),
      limits: (_org, nowMs) => limitsOf(nowMs),
      // A turn's commands split over several appends in flight (the fairness cap, VIGIL_WRITER_MAX_BATCH).
      ...(kind.endsWith('at most 2') ? { maxBatch: 2 } : {}),
    };
    await fc.assert(
      fc.asyncProperty(run, async ({ start, limits, steps }) => {
        const org = `run-${++runs}`;
        clock = start;
        limitsOf = LIMITS[limits]!;
        const writer = await OrgLedgerActor.start(org, log, options);
        const held: number[] = [];
        for (const { advance, commands: drafts } of steps) {
          clock += advance;
          const commands = drafts.map((c): LedgerCommand => {
            if (c.type !== 'review.held') return { ...c, org };
            // Before any action is held, an id that is not.
            const actionId = held.length === 0 ? 1 + c.pick : held[c.pick % held.length]!;
            return { type: 'review.decide', org, actionId, decision: c.decision, reviewer: 'key:r' };
          });
          const replies = await Promise.all(commands.map((c) => writer.submit(c)));
          replies.forEach((answer, i) => {
            // Only a writer given onConflict answers not_owner; this one is not.
            if (!answer.ok && answer.code === 'not_owner') throw new Error('not_owner without onConflict');
            const reply = answer;
            note(seen, commands[i]!, reply);
            if (reply.ok && commands[i]!.type === 'event.ingest') {
              const result = reply.value as { action_id: number; requires_human_review: boolean };
              if (result.requires_human_review) held.push(result.action_id);
            }
          });
        }
        const live = await writer.nextSnapshot();
        const recovery = new OrgRecovery(POLICY_V1);
        const months = new Set<string>();
        for await (const batch of log.read(org, 1)) {
          for (const row of batch.rows) {
            recovery.apply(row);
            months.add(row.recordedAt.slice(0, 7));
          }
          recovery.fence = batch.fence;
        }
        if (months.size > 1) seen.add('month turned');
        const recovered = recovery.snapshot();
        expect(comparable(recovered)).toEqual(comparable(live));
        expect(recovered.lastMs).toBeLessThanOrEqual(live.lastMs);
      }),
      { numRuns: 100, examples: [[EVERY_PATH]] },
    );
    for (const path of [
      'agent.register ok',
      'agent.register conflict',
      'agent.register plan_limit',
      'agent.update ok',
      'agent.update not_found',
      'agent.update plan_limit',
      'agent.update conflict',
      'event.ingest ok',
      'event.ingest held',
      'event.ingest not_found',
      'event.ingest conflict',
      'event.ingest quota_exceeded',
      'review.decide ok',
      'review.decide not_found',
      'review.decide conflict',
      'export.record ok',
      'export.record quota_exceeded',
      'month turned',
    ]) {
      expect(seen, path).toContain(path);
    }
  });
});

function note(seen: Set<string>, command: LedgerCommand, reply: OrgReply): void {
  seen.add(`${command.type} ${reply.ok ? 'ok' : reply.code}`);
  if (reply.ok && command.type === 'event.ingest' && (reply.value as { requires_human_review: boolean }).requires_human_review) seen.add('event.ingest held');
}
