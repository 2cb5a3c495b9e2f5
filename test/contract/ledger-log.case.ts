import { describe, expect, it } from 'vitest';
import type { CommittedBatch, LedgerCapability, LedgerLog } from '../../src/bus/ledger-log.js';
import { GENESIS_HASH, makeRow, type LedgerRow } from '../../src/domain/ledger.js';

export interface LedgerLogHarness {
  log: LedgerLog;
  /** A second log over the same storage, as a restarted process (or another node) sees it. */
  reopen(): Promise<LedgerLog>;
  dispose(): Promise<void>;
}

/** Builds `count` chained rows for one org, continuing from `after`. */
export function chain(count: number, after?: LedgerRow): LedgerRow[] {
  const rows: LedgerRow[] = [];
  let prev = after?.chainHash ?? GENESIS_HASH;
  let seq = after?.seq ?? 0;
  for (let i = 0; i < count; i++) {
    const row = makeRow(prev, ++seq, 'event', '2026-11-22T00:00:00.000Z', 'agent', { i: seq });
    rows.push(row);
    prev = row.chainHash;
  }
  return rows;
}

async function batches(log: LedgerLog, org: string, from = 1): Promise<CommittedBatch[]> {
  const out: CommittedBatch[] = [];
  for await (const batch of log.read(org, from)) out.push(batch);
  return out;
}

/** The fence a log with pipelined appends foretells for an append of `rows`. */
function foretell(log: LedgerLog, rows: readonly LedgerRow[]): number {
  if (log.fenceAfter === undefined) throw new Error('a log with pipelined appends has fenceAfter');
  return log.fenceAfter(rows);
}

async function seqs(log: LedgerLog, org: string, from = 1): Promise<number[]> {
  return (await batches(log, org, from)).flatMap((b) => b.rows.map((r) => r.seq));
}

/** The fence an append continuing an org's ledger presents, as read from the log. */
async function fenceOf(log: LedgerLog, org: string): Promise<number> {
  return (await batches(log, org)).at(-1)?.fence ?? 0;
}

/**
 * The LedgerLog contract (src/bus/ledger-log.ts). Every adapter runs it, declaring its
 * capabilities: a case for a capability the adapter lacks is reported as skipped, never dropped.
 */
export function runLedgerLogContract(name: string, capabilities: readonly LedgerCapability[], make: () => Promise<LedgerLogHarness>): void {
  const has = (c: LedgerCapability): boolean => capabilities.includes(c);

  /** Runs a case against a fresh harness, disposed of whatever happens. */
  const withHarness = (body: (h: LedgerLogHarness) => Promise<void>) => async (): Promise<void> => {
    const h = await make();
    try {
      await body(h);
    } finally {
      await h.dispose();
    }
  };

  describe(`LedgerLog contract: ${name}`, () => {
    it('declares the capabilities it is tested for', withHarness(async (h) => {
      expect([...h.log.capabilities].sort()).toEqual([...capabilities].sort());
    }));

    it('appends durably, returns the fence the next append presents, and reads one org back in seq order', withHarness(async (h) => {
      const rows = chain(3000);
      const first = await h.log.append('o1', rows.slice(0, 1000), 0);
      expect(first.ok).toBe(true);
      const fence = first.ok ? first.fence : -1;
      expect(await h.log.append('o1', rows.slice(1000), fence)).toMatchObject({ ok: true });
      expect(await h.log.append('o2', chain(2), 0)).toMatchObject({ ok: true });
      expect(await seqs(h.log, 'o1')).toEqual(rows.map((r) => r.seq));
      expect(await seqs(h.log, 'o1', 2990)).toEqual([2990, 2991, 2992, 2993, 2994, 2995, 2996, 2997, 2998, 2999, 3000]);
      expect(await seqs(h.log, 'o2')).toEqual([1, 2]);
      expect(await seqs(h.log, 'nobody')).toEqual([]);
      for (const batch of await batches(h.log, 'o1')) expect(batch.org).toBe('o1');
    }));

    it('refuses an append whose fence is stale, and writes nothing of it', withHarness(async (h) => {
      const rows = chain(5);
      const first = await h.log.append('o', rows.slice(0, 3), 0);
      expect(first.ok).toBe(true);
      expect(await h.log.append('o', chain(2), 0)).toEqual({ ok: false, reason: 'conflict' });
      expect(await seqs(h.log, 'o')).toEqual([1, 2, 3]);
      // A fence that was current once, but is no more.
      const second = await h.log.append('o', rows.slice(3, 4), first.ok ? first.fence : -1);
      expect(second.ok).toBe(true);
      expect(await h.log.append('o', rows.slice(4), first.ok ? first.fence : -1)).toEqual({ ok: false, reason: 'conflict' });
      expect(await seqs(h.log, 'o')).toEqual([1, 2, 3, 4]);
      // The fence read back from the log continues the ledger, as a new owner's would.
      expect(await h.log.append('o', rows.slice(4), await fenceOf(h.log, 'o'))).toMatchObject({ ok: true });
      expect(await seqs(h.log, 'o')).toEqual([1, 2, 3, 4, 5]);
    }));

    it.skipIf(!has('pipelined-appends'))('pipelined appends: commit in order, and every append behind a refused one is refused', withHarness(async (h) => {
      const rows = chain(9);
      const f1 = foretell(h.log, rows.slice(0, 3));
      const f2 = foretell(h.log, rows.slice(3, 6));
      const a = h.log.append('q', rows.slice(0, 3), 0);
      const b = h.log.append('q', rows.slice(3, 6), f1);
      const foreign = h.log.append('x', chain(2), f2); // another org's append, with a fence it never had
      const c = h.log.append('q', rows.slice(6), f2);
      const done = await Promise.all([a, b, c]);
      expect(done.map((o) => o.ok)).toEqual([true, true, true]);
      expect(await foreign).toEqual({ ok: false, reason: 'conflict' });
      expect(await seqs(h.log, 'x')).toEqual([]);
      expect(done[2]).toEqual({ ok: true, fence: foretell(h.log, rows.slice(6)) });
      expect(await seqs(h.log, 'q')).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
      const more = chain(6, rows.at(-1));
      const stale = h.log.append('q', more.slice(0, 2), f2); // the fence of batch b, not c
      const behind = h.log.append('q', more.slice(2, 4), foretell(h.log, more.slice(0, 2)));
      expect(await Promise.all([stale, behind])).toEqual([{ ok: false, reason: 'conflict' }, { ok: false, reason: 'conflict' }]);
      expect(await seqs(h.log, 'q')).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }));

    it('replays committed batches to a new subscriber, then delivers live ones once, in order', withHarness(async (h) => {
      const a = chain(1500);
      const b = chain(3);
      const fa = await h.log.append('a', a.slice(0, 1200), 0);
      const fb = await h.log.append('b', b.slice(0, 1), 0);
      const seen = new Map<string, number[]>();
      const sub = await h.log.subscribe(({ org, rows }) => {
        const list = seen.get(org) ?? [];
        for (const r of rows) list.push(r.seq);
        seen.set(org, list);
      }, h.log.positionAfter(new Map()));
      const second: number[] = [];
      await h.log.subscribe(({ org, rows }) => {
        if (org === 'a') second.push(...rows.map((r) => r.seq));
      }, h.log.positionAfter(new Map()));
      await h.log.append('a', a.slice(1200), fa.ok ? fa.fence : -1);
      const fb2 = await h.log.append('b', b.slice(1), fb.ok ? fb.fence : -1);
      await expect.poll(() => seen.get('a')?.length).toBe(1500);
      await expect.poll(() => seen.get('b')?.length).toBe(3);
      expect(seen.get('a')).toEqual(a.map((r) => r.seq));
      expect(seen.get('b')).toEqual([1, 2, 3]);
      // Subscribers are fed independently: a remote log's second one may still be catching up.
      await expect.poll(() => second.length).toBe(1500);
      expect(second).toEqual(a.map((r) => r.seq));
      sub.unsubscribe();
      await h.log.append('b', chain(1, b.at(-1)), fb2.ok ? fb2.fence : -1);
      await expect.poll(async () => (await seqs(h.log, 'b')).length).toBe(4);
      expect(seen.get('b')).toEqual([1, 2, 3]);
    }));

    it('resolves subscribe only once the replay of what was committed has been delivered', withHarness(async (h) => {
      await h.log.append('r', chain(5), 0);
      let taken = 0;
      await h.log.subscribe(({ rows }) => (taken += rows.length), h.log.positionAfter(new Map()));
      expect(taken).toBe(5);
    }));

    it('gives each row once to subscribers that join while appends are in flight', withHarness(async (h) => {
      const rows = chain(40);
      const appending = (async () => {
        let fence = 0;
        for (let i = 0; i < rows.length; i += 2) {
          const outcome = await h.log.append('j', rows.slice(i, i + 2), fence);
          if (!outcome.ok) throw new Error('append refused');
          fence = outcome.fence;
        }
      })();
      const seen: number[][] = [];
      for (let k = 0; k < 12; k++) {
        const mine: number[] = [];
        seen.push(mine);
        await h.log.subscribe(({ rows: got }) => mine.push(...got.map((r) => r.seq)), h.log.positionAfter(new Map()));
        await new Promise((resolve) => setImmediate(resolve));
      }
      await appending;
      for (const mine of seen) await expect.poll(() => mine.length).toBeGreaterThanOrEqual(rows.length);
      for (const mine of seen) expect(mine).toEqual(rows.map((r) => r.seq));
    }));

    it('starts a replay at a position: each org after the seq the subscriber holds', withHarness(async (h) => {
      await h.log.append('a', chain(10), 0);
      await h.log.append('b', chain(4), 0);
      await h.log.append('c', chain(2), 0);
      const seen = new Map<string, number[]>();
      await h.log.subscribe(({ org, rows }) => {
        // A batch may repeat held rows only together with newer ones; the consumer skips them.
        seen.set(org, [...(seen.get(org) ?? []), ...rows.map((r) => r.seq)]);
      }, h.log.positionAfter(new Map([['a', 7], ['b', 4]])));
      await expect.poll(() => seen.get('c')?.length).toBe(2);
      expect(seen.get('a')!.filter((s) => s > 7)).toEqual([8, 9, 10]);
      expect(seen.get('b')?.filter((s) => s > 4) ?? []).toEqual([]);
      expect(seen.get('c')).toEqual([1, 2]);
    }));

    it('delivers a batch to subscribers only once it is readable (durable), with the fence that continues it', withHarness(async (h) => {
      const observed: boolean[] = [];
      const fences: number[] = [];
      await h.log.subscribe((batch) => {
        fences.push(batch.fence);
        void seqs(h.log, batch.org).then((stored) => observed.push(batch.rows.every((r) => stored.includes(r.seq))));
      }, h.log.positionAfter(new Map()));
      const outcome = await h.log.append('d', chain(10), 0);
      await expect.poll(() => observed.length).toBe(1);
      expect(observed).toEqual([true]);
      expect(fences).toEqual([outcome.ok ? outcome.fence : -1]);
    }));

    it.skipIf(!has('local-delivery'))('local delivery: a live subscriber has taken a batch before its append resolves', withHarness(async (h) => {
      let taken = 0;
      await h.log.subscribe(({ rows }) => (taken += rows.length), h.log.positionAfter(new Map()));
      const outcome = await h.log.append('l', chain(3), 0);
      expect(outcome.ok).toBe(true);
      expect(taken).toBe(3);
    }));

    it('does not fail an append because a subscriber throws', withHarness(async (h) => {
      await h.log.subscribe(() => {
        throw new Error('subscriber bug');
      }, h.log.positionAfter(new Map()));
      expect(await h.log.append('t', chain(2), 0)).toMatchObject({ ok: true });
      expect(await seqs(h.log, 't')).toEqual([1, 2]);
    }));

    it('keeps committed rows and fences across a reopen of the log', withHarness(async (h) => {
      const rows = chain(6);
      await h.log.append('p', rows.slice(0, 4), 0);
      const other = await h.reopen();
      expect(await seqs(other, 'p')).toEqual([1, 2, 3, 4]);
      expect(await other.append('p', rows.slice(4), await fenceOf(other, 'p'))).toMatchObject({ ok: true });
      expect(await other.append('p', chain(1), 0)).toEqual({ ok: false, reason: 'conflict' });
      await other.close();
    }));
  });
}
