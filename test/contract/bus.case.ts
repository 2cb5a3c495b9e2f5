import { describe, expect, it } from 'vitest';
import type { Bus } from '../../src/bus/bus.js';
import type { OrgCommand, OrgReply } from '../../src/bus/messages.js';
import { GENESIS_HASH, makeRow, type LedgerRow } from '../../src/domain/ledger.js';

export interface BusHarness {
  bus: Bus;
  /** A second bus over the same log, as another node or a restarted process would see it. */
  reopen?: () => Promise<Bus>;
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

async function collect(bus: Bus, org: string, from = 1): Promise<number[]> {
  const seqs: number[] = [];
  for await (const chunk of bus.read(org, from)) for (const row of chunk) seqs.push(row.seq);
  return seqs;
}

const ingest = (org: string, n: number): OrgCommand => ({
  type: 'event.ingest',
  org,
  event: { agent_id: `a${n}`, event_type: 'output_generated', payload: { n }, dti: null, source: 'self', actor: null },
});

/**
 * The Bus contract (see src/bus/bus.ts). Every adapter runs this suite: the in-process one now,
 * the JetStream one in cluster mode.
 */
export function runBusContract(name: string, make: () => Promise<BusHarness>): void {
  describe(`Bus contract: ${name}`, () => {
    it('resolves an append only after the promise a live subscriber returned has settled', async () => {
      const h = await make();
      try {
        let release!: () => void;
        const stored = new Promise<void>((resolve) => (release = resolve));
        let taken = 0;
        await h.bus.subscribe((_org, rows) => {
          taken += rows.length;
          return stored;
        });
        let settled = false;
        const appending = h.bus.append('p', chain(3), 0).then((outcome) => {
          settled = true;
          return outcome;
        });
        await expect.poll(() => taken).toBe(3);
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(settled).toBe(false);
        release();
        expect(await appending).toEqual({ ok: true });
      } finally {
        await h.dispose();
      }
    });

    it('appends durably and reads back one org rows in seq order', async () => {
      const h = await make();
      try {
        const rows = chain(3000);
        expect(await h.bus.append('o1', rows.slice(0, 1000), 0)).toEqual({ ok: true });
        expect(await h.bus.append('o1', rows.slice(1000), 1000)).toEqual({ ok: true });
        expect(await h.bus.append('o2', chain(2), 0)).toEqual({ ok: true });
        const seqs = await collect(h.bus, 'o1');
        expect(seqs).toEqual(rows.map((r) => r.seq));
        expect(await collect(h.bus, 'o1', 2990)).toEqual([2990, 2991, 2992, 2993, 2994, 2995, 2996, 2997, 2998, 2999, 3000]);
        expect(await collect(h.bus, 'o2')).toEqual([1, 2]);
        expect(await collect(h.bus, 'nobody')).toEqual([]);
      } finally {
        await h.dispose();
      }
    });

    it('refuses an append whose expected last seq is stale, and writes nothing of it', async () => {
      const h = await make();
      try {
        const rows = chain(5);
        await h.bus.append('o', rows.slice(0, 3), 0);
        expect(await h.bus.append('o', rows.slice(3), 2)).toEqual({ ok: false, reason: 'conflict' });
        expect(await h.bus.append('o', chain(2), 0)).toEqual({ ok: false, reason: 'conflict' });
        expect(await collect(h.bus, 'o')).toEqual([1, 2, 3]);
        expect(await h.bus.append('o', rows.slice(3), 3)).toEqual({ ok: true });
      } finally {
        await h.dispose();
      }
    });

    it('commits pipelined appends in order, and refuses every append behind a refused one', async () => {
      const h = await make();
      try {
        const rows = chain(9);
        const a = h.bus.append('q', rows.slice(0, 3), 0);
        const b = h.bus.append('q', rows.slice(3, 6), 3);
        const stale = h.bus.append('x', chain(2), 5);
        const c = h.bus.append('q', rows.slice(6), 6);
        expect(await Promise.all([a, b, c, stale])).toEqual([{ ok: true }, { ok: true }, { ok: true }, { ok: false, reason: 'conflict' }]);
        expect(await collect(h.bus, 'q')).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
        const more = chain(6, rows.at(-1));
        const refused = h.bus.append('q', more.slice(0, 2), 8); // stale: the tail is 9
        const behind = h.bus.append('q', more.slice(2, 4), 11); // builds on the refused batch
        expect(await Promise.all([refused, behind])).toEqual([{ ok: false, reason: 'conflict' }, { ok: false, reason: 'conflict' }]);
        expect(await collect(h.bus, 'q')).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
      } finally {
        await h.dispose();
      }
    });

    it('replays committed rows to a new subscriber, then delivers live rows once, in order', async () => {
      const h = await make();
      try {
        const a = chain(1500);
        const b = chain(3);
        await h.bus.append('a', a.slice(0, 1200), 0);
        await h.bus.append('b', b.slice(0, 1), 0);
        const seen = new Map<string, number[]>();
        const sub = await h.bus.subscribe((org, rows) => {
          const list = seen.get(org) ?? [];
          for (const r of rows) list.push(r.seq);
          seen.set(org, list);
        });
        const second: number[] = [];
        await h.bus.subscribe((org, rows) => {
          if (org === 'a') second.push(...rows.map((r) => r.seq));
        });
        await h.bus.append('a', a.slice(1200), 1200);
        await h.bus.append('b', b.slice(1), 1);
        await expect.poll(() => seen.get('a')?.length).toBe(1500);
        expect(seen.get('a')).toEqual(a.map((r) => r.seq));
        expect(seen.get('b')).toEqual([1, 2, 3]);
        expect(second).toEqual(a.map((r) => r.seq));
        sub.unsubscribe();
        await h.bus.append('b', chain(1, b.at(-1)), 3);
        expect(seen.get('b')).toEqual([1, 2, 3]);
      } finally {
        await h.dispose();
      }
    });

    it('delivers a row to subscribers only once it is readable (durable)', async () => {
      const h = await make();
      try {
        const observed: boolean[] = [];
        await h.bus.subscribe((org, rows) => {
          void collect(h.bus, org).then((seqs) => observed.push(rows.every((r) => seqs.includes(r.seq))));
        });
        await h.bus.append('d', chain(10), 0);
        await expect.poll(() => observed.length).toBe(1);
        expect(observed).toEqual([true]);
      } finally {
        await h.dispose();
      }
    });

    it('routes commands to the serving handler in the order sent and returns its replies', async () => {
      const h = await make();
      try {
        const order: number[] = [];
        h.bus.serve(async (command) => {
          if (command.type !== 'event.ingest') throw new Error('unexpected');
          const n = command.event.payload.n as number;
          order.push(n);
          return { ok: true, value: { event_id: n } } as unknown as OrgReply;
        });
        const replies = await Promise.all(Array.from({ length: 50 }, (_, n) => h.bus.request(ingest('org', n))));
        expect(order).toEqual(Array.from({ length: 50 }, (_, n) => n));
        expect(replies.map((r) => (r.ok && "event_id" in r.value ? r.value.event_id : -1))).toEqual(order);
      } finally {
        await h.dispose();
      }
    });

    it('answers unavailable when no writer serves commands', async () => {
      const h = await make();
      try {
        const reply = await h.bus.request(ingest('org', 1));
        expect(reply).toMatchObject({ ok: false, code: 'unavailable' });
      } finally {
        await h.dispose();
      }
    });

    it('keeps committed rows across a reopen of the log', async () => {
      const h = await make();
      try {
        if (h.reopen === undefined) return;
        await h.bus.append('p', chain(4), 0);
        const other = await h.reopen();
        expect(await collect(other, 'p')).toEqual([1, 2, 3, 4]);
        await other.close();
      } finally {
        await h.dispose();
      }
    });
  });
}
