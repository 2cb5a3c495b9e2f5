import { afterEach, describe, expect, it } from 'vitest';
import type { LedgerLog } from '../../src/bus/ledger-log.js';
import type { OrgReply } from '../../src/bus/messages.js';
import { ChainVerifier } from '../../src/domain/ledger.js';
import { embedded, type Embedded } from '../support/embedded.js';
import { removeDir, tempDir } from '../support/server.js';
import { withAppend } from '../support/with-append.js';
import { WriterShare } from '../../src/actors/writer-share.js';

/**
 * Fairness between org writers on a real LMDB store (sync durability): org A's backlog is
 * appended in batches of at most `maxBatch`, at most two of them in flight, so org B's command is
 * queued for the disk behind a bounded part of A's backlog, not all of it. Without the cap, A's 2,000 commands are one append made before B's, and
 * B is answered only once all of them are durable.
 */
const MAX_BATCH = 16;
const BACKLOG = 2000;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** The embedded write path, with the size of each org's appends and the most rows it had in flight at once. */
async function setup(share?: WriterShare): Promise<{ path: Embedded; appends: Map<string, number[]>; mostInFlight: Map<string, number> }> {
  const dir = tempDir('vigil-fairness-');
  const appends = new Map<string, number[]>();
  const inFlight = new Map<string, number>();
  const mostInFlight = new Map<string, number>();
  const counting = (inner: LedgerLog): LedgerLog =>
    withAppend(inner, (org, rows, expected) => {
      appends.set(org, [...(appends.get(org) ?? []), rows.length]);
      const now = (inFlight.get(org) ?? 0) + rows.length;
      inFlight.set(org, now);
      mostInFlight.set(org, Math.max(now, mostInFlight.get(org) ?? 0));
      return inner.append(org, rows, expected).finally(() => inFlight.set(org, inFlight.get(org)! - rows.length));
    });
  const path = embedded(dir, { maxPending: 100_000, maxBatch: MAX_BATCH, ...(share === undefined ? {} : { share }) }, counting);
  cleanups.push(async () => {
    await path.close();
    removeDir(dir);
  });
  for (const org of ['a', 'b']) {
    const reply = await path.commands.request({ type: 'agent.register', org, agent: { agent_id: 'x', name: 'X', kind: 'production', observed: true } });
    expect(reply.ok).toBe(true);
  }
  appends.clear();
  mostInFlight.clear();
  return { path, appends, mostInFlight };
}

const ingest = (org: string, n: number) => ({
  type: 'event.ingest' as const,
  org,
  event: { agent_id: 'x', event_type: 'output_generated' as const, payload: { n }, dti: null, source: 'self' as const, actor: null },
});

describe('one org flooding its writer does not hold up another org (real LMDB)', () => {
  for (const when of ['in the same event-loop turn as', 'a turn after'] as const) {
    it(`org B's command sent ${when} org A's backlog of ${BACKLOG} is durable with at most 4 × maxBatch of A's before it`, async () => {
      const { path, appends, mostInFlight } = await setup();
      const flood: Promise<OrgReply>[] = Array.from({ length: BACKLOG }, (_, n) => path.commands.request(ingest('a', n)) as Promise<OrgReply>);
      if (when === 'a turn after') await new Promise((resolve) => setImmediate(resolve));
      // A's rows durable when B's answer comes (its seq 1 is the agent's registration).
      const b = await path.commands.request(ingest('b', 0)).then((reply) => ({ reply, aDurable: (path.stores.ledger.last('a')?.seq ?? 0) - 1 }));
      expect(b.reply.ok).toBe(true);
      // B's append was queued behind A's batches in flight (at most 2 × maxBatch commands); a
      // batch or two of A's launched after it may commit with it, before its answer is read.
      expect(b.aDurable).toBeLessThanOrEqual(4 * MAX_BATCH);

      const replies = await Promise.all(flood);
      expect(replies.filter((r) => !r.ok)).toEqual([]);
      // Group commit kept: A's backlog went in full batches of maxBatch, in order, none lost.
      expect(appends.get('a')).toEqual(Array.from({ length: BACKLOG / MAX_BATCH }, () => MAX_BATCH));
      expect(appends.get('b')).toEqual([1]);
      // A batch went only while A had at most 2 × maxBatch in flight with it.
      expect(mostInFlight.get('a')).toBe(2 * MAX_BATCH);
      const ids = replies.map((r) => (r.ok ? (r.value as { event_id: number }).event_id : 0));
      expect(ids).toEqual(Array.from({ length: BACKLOG }, (_, i) => i + 1));
      await expectWhole(path);
    });
  }
});

/** Both orgs' ledgers hold every row, in seq order, on an unbroken chain. */
async function expectWhole(path: Embedded): Promise<void> {
  for (const org of ['a', 'b']) {
    const rows = await path.rows(org);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: org === 'a' ? BACKLOG + 1 : 2 }, (_, i) => i + 1));
    const verifier = new ChainVerifier();
    for (const row of rows) verifier.push(row);
    expect(verifier.report()).toMatchObject({ ok: true, first_bad_seq: null });
  }
}

describe('writers that share the disk (WriterShare): beside a busy org, a quarter batch, one in flight', () => {
  const SHARED = MAX_BATCH / 4;
  for (const [when, bound] of [['in the same event-loop turn as', 2 * SHARED], ['a turn after', 2 * MAX_BATCH + 2 * SHARED]] as const) {
    it(`org B's command sent ${when} org A's backlog is durable with at most ${bound} of A's before it; A goes back to full batches after`, async () => {
      const { path, appends, mostInFlight } = await setup(new WriterShare());
      const flood: Promise<OrgReply>[] = Array.from({ length: BACKLOG }, (_, n) => path.commands.request(ingest('a', n)) as Promise<OrgReply>);
      if (when === 'a turn after') await new Promise((resolve) => setImmediate(resolve));
      const b = await path.commands.request(ingest('b', 0)).then((reply) => ({ reply, aDurable: (path.stores.ledger.last('a')?.seq ?? 0) - 1 }));
      expect(b.reply.ok).toBe(true);
      expect(b.aDurable).toBeLessThanOrEqual(bound);

      const replies = await Promise.all(flood);
      expect(replies.filter((r) => !r.ok)).toEqual([]);
      const sizes = appends.get('a')!;
      // Small batches while B was busy (B's one row may be durable before A's next batch goes: then
      // none), full ones after (the last takes what is left); none lost.
      if (when === 'in the same event-loop turn as') expect(sizes[0]).toBe(SHARED);
      expect(sizes.at(-2)).toBe(MAX_BATCH);
      expect(sizes.slice(0, -1).every((size) => size === SHARED || size === MAX_BATCH)).toBe(true);
      expect(sizes.reduce((n, size) => n + size, 0)).toBe(BACKLOG);
      expect(mostInFlight.get('a')).toBe(2 * MAX_BATCH);
      await expectWhole(path);
    });
  }
});
