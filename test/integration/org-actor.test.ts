import { afterEach, describe, expect, it } from 'vitest';
import type { LedgerLog } from '../../src/bus/ledger-log.js';
import { ChainVerifier } from '../../src/domain/ledger.js';
import { within } from '../../src/time-bound.js';
import { embedded } from '../support/embedded.js';
import { captureLogger, type LogLine } from '../support/logs.js';
import { withAppend } from '../support/with-append.js';
import { withWriter } from '../support/writer.js';
import { removeDir, tempDir } from '../support/server.js';

/** `inner` with its append replaced (the rest passes through). */
/** A ledger log whose chosen appends fail before reaching the store, as a failing disk would. */
function flaky(inner: LedgerLog, failOn: Set<number>): LedgerLog {
  let n = 0;
  return withAppend(inner, (org, rows, expected) => (failOn.has(++n) ? Promise.reject(new Error('EIO: disk on fire')) : inner.append(org, rows, expected)));
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function setup(failOn: number[], maxInflight = 4, maxBatch?: number) {
  const dir = tempDir('vigil-actor-');
  const path = embedded(dir, { maxPending: 100_000, maxInflight, ...(maxBatch === undefined ? {} : { maxBatch }) }, (log) => flaky(log, new Set(failOn)));
  cleanups.push(async () => {
    await path.close();
    removeDir(dir);
  });
  return { store: path.stores.ledger, bus: path.commands };
}

const ingest = (n: number) => ({
  type: 'event.ingest' as const,
  org: 'o',
  event: { agent_id: 'a', event_type: 'output_generated' as const, payload: { n }, dti: null, source: 'self' as const, actor: null },
});

describe('org ledger actor under append failures', () => {
  it.each([
    ['', undefined],
    [' (a turn\'s commands split in batches of at most 4)', 4],
  ])('refuses the failed batch and those in flight behind it, leaves no gap, and carries on%s', async (_, maxBatch) => {
    const { store, bus } = await setup([3, 7], 4, maxBatch);
    await bus.request({ type: 'agent.register', org: 'o', agent: { agent_id: 'a', name: 'A', kind: 'production', observed: true } });
    const acked = new Map<number, number>();
    let refused = 0;
    const client = async (c: number) => {
      for (let i = 0; i < 40; i++) {
        const n = c * 1000 + i;
        const reply = await bus.request(ingest(n));
        if (reply.ok) acked.set(reply.value.event_id, n);
        else {
          expect(reply.code).toBe('unavailable');
          refused++;
        }
      }
    };
    await Promise.all(Array.from({ length: 32 }, (_, c) => client(c)));
    expect(refused).toBeGreaterThan(0);
    expect(acked.size + refused).toBe(32 * 40);

    const verifier = new ChainVerifier();
    const events = new Map<number, number>();
    for (const row of store.range('o', 1)) {
      verifier.push(row);
      const body = JSON.parse(row.bodyJson);
      if (row.kind === 'event') events.set(body.event_id, body.payload.n);
    }
    expect(verifier.report()).toMatchObject({ ok: true, first_bad_seq: null });
    // Exactly the acknowledged events are recorded, with the payloads their callers sent.
    expect(events).toEqual(acked);
    const ids = [...events.keys()];
    ids.forEach((id, i) => expect(id).toBe(i + 1));
  });

  it('recovers the same state the ledger holds (ids continue from the last recorded event)', async () => {
    const { store, bus } = await setup([2], 1);
    await bus.request({ type: 'agent.register', org: 'o', agent: { agent_id: 'a', name: 'A', kind: 'production', observed: true } });
    const failed = await bus.request(ingest(1));
    expect(failed).toMatchObject({ ok: false, code: 'unavailable' });
    const next = await bus.request(ingest(2));
    expect(next.ok && next.value.event_id).toBe(1);
    expect(store.last('o')?.seq).toBe(2);
  });
});

describe('org ledger actor whose recovery fails at first', () => {
  it('decides the commands that waited meanwhile as soon as a retried recovery heals, with no new command to wake it', async () => {
    const dir = tempDir('vigil-actor-');
    const lines: LogLine[] = [];
    let readsToFail = 0;
    let readFailed = (): void => {};
    const failedRead = new Promise<void>((resolve) => (readFailed = resolve));
    const path = embedded(dir, { maxPending: 100, log: captureLogger(lines) }, (log) => {
      let appends = 0;
      const wrapped = withAppend(log, (org, rows, expected) => {
        if (++appends !== 2) return log.append(org, rows, expected);
        readsToFail = 1; // the recovery after this failure reads the ledger, and fails
        return Promise.reject(new Error('EIO: disk on fire'));
      });
      return {
        ...wrapped,
        async *read(org, from) {
          if (readsToFail > 0) {
            readsToFail--;
            readFailed();
            throw new Error('EIO: the ledger cannot be read yet');
          }
          yield* log.read(org, from);
        },
      };
    });
    cleanups.push(async () => {
      await path.close();
      removeDir(dir);
    });
    await path.commands.request({ type: 'agent.register', org: 'o', agent: { agent_id: 'a', name: 'A', kind: 'production', observed: true } });
    expect(await path.commands.request(ingest(1))).toMatchObject({ ok: false, code: 'unavailable' });
    await failedRead;
    await new Promise((resolve) => setImmediate(resolve));
    // Sent while the writer is broken, and the only command: only the healing can launch it.
    const waiting = path.commands.request(ingest(2));
    const reply = await within(waiting, 10_000, () => 'never answered' as const);
    expect(reply).toMatchObject({ ok: true, value: { event_id: 1 } });
    expect(lines.filter((l) => l.msg === 'recovery failed').map((l) => l.fields?.failures)).toEqual([1]);
    expect(lines.filter((l) => l.msg === 'recovered after failed recoveries').map((l) => l.fields?.failures)).toEqual([1]);
  }, 20_000);
});

/** A ledger log whose chosen appends land and then report a failure, as a flush failing after the commit would. */
function landsThenFails(inner: LedgerLog, failOn: Set<number>): LedgerLog {
  let n = 0;
  return withAppend(inner, (org, rows, expected) => {
    const fails = failOn.has(++n);
    return inner.append(org, rows, expected).then((outcome) => {
      if (fails) throw new Error('EIO: the flush after the commit failed');
      return outcome;
    });
  });
}

describe('org ledger actor when an append lands but reports a failure', () => {
  it('stores what every landed row causes exactly once (afterAppend), those of the failed appends when it heals', async () => {
    const dir = tempDir('vigil-actor-');
    const stored: number[] = [];
    const path = embedded(
      dir,
      { maxPending: 100_000, afterAppend: (_org, rows) => void stored.push(...rows.map((r) => r.seq)) },
      (log) => landsThenFails(log, new Set([3, 8, 9])),
    );
    cleanups.push(async () => {
      await path.close();
      removeDir(dir);
    });
    await path.commands.request({ type: 'agent.register', org: 'o', agent: { agent_id: 'a', name: 'A', kind: 'production', observed: true } });
    let refused = 0;
    const client = async (c: number) => {
      for (let i = 0; i < 25; i++) if (!(await path.commands.request(ingest(c * 1000 + i))).ok) refused++;
    };
    await Promise.all(Array.from({ length: 16 }, (_, c) => client(c)));
    expect(refused).toBeGreaterThan(0);
    const seqs = (await path.rows('o')).map((r) => r.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect(stored).toEqual(seqs);
  });
});

describe('org ledger actor with a bound on afterAppend (cluster mode: a webhook stream that does not answer)', () => {
  it('answers a batch once the bound passes, and later batches without waiting while the late one still runs', async () => {
    let release = (): void => {};
    const hanging = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    await withWriter(
      async (w) => {
        const first = Date.now();
        expect((await w.ingest({ n: 1 })).ok).toBe(true);
        const firstMs = Date.now() - first;
        expect(firstMs).toBeGreaterThanOrEqual(1400); // it waited for the bound
        const second = Date.now();
        expect((await w.ingest({ n: 2 })).ok).toBe(true);
        expect(Date.now() - second).toBeLessThan(1000); // not again while the first still runs
        release();
        await hanging;
        expect(calls).toBe(3); // the agent, then each event: afterAppend still ran for every batch
      },
      { afterAppendMs: 1500, afterAppend: () => (++calls === 1 ? undefined : hanging) },
    );
  });
});

describe('org writers dropped when their partition moves (cluster mode: OrgActors.forget)', () => {
  /** The embedded write path over a log whose reads of org `o` fail or wait while `reads.fail` / `reads.gate` say so. */
  function droppable(appendsToFail: Set<number>) {
    const dir = tempDir('vigil-actor-');
    const reads = { count: 0, fail: false, gate: Promise.resolve() };
    const path = embedded(dir, { maxPending: 100 }, (log) => {
      let appends = 0;
      const wrapped = withAppend(log, (org, rows, expected) => (appendsToFail.has(++appends) ? Promise.reject(new Error('EIO: disk on fire')) : log.append(org, rows, expected)));
      return {
        ...wrapped,
        async *read(org, from) {
          reads.count++;
          await reads.gate;
          if (reads.fail) throw new Error('EIO: the ledger cannot be read');
          yield* log.read(org, from);
        },
      };
    });
    cleanups.push(async () => {
      await path.close();
      removeDir(dir);
    });
    return { path, reads };
  }

  it('a writer retrying a failed recovery stops retrying, and answers what waits in it not_owner', async () => {
    const { path, reads } = droppable(new Set([2]));
    await path.commands.request({ type: 'agent.register', org: 'o', agent: { agent_id: 'a', name: 'A', kind: 'production', observed: true } });
    reads.fail = true;
    const before = reads.count;
    expect(await path.commands.request(ingest(1))).toMatchObject({ ok: false, code: 'unavailable' });
    // The writer is broken: its recovery reads the ledger, fails, and is retried every second.
    const deadline = Date.now() + 5_000;
    while (reads.count === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(reads.count).toBeGreaterThan(before);
    // Straight to the writers (the router would take a not_owner answer to the owner again).
    const waiting = path.actors.handle(ingest(2));
    path.actors.forget((org) => org === 'o');
    expect(await within(waiting, 5_000, () => 'never answered' as const)).toMatchObject({ ok: false, code: 'not_owner' });
    const after = reads.count;
    // Retries came every second before: none in the next 2.5 s.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(reads.count).toBe(after);
    expect([...path.actors.depths()]).toEqual([]);
  }, 20_000);

  it('a writer still starting when dropped is retired once started: what waited for it is answered not_owner, nothing decided', async () => {
    const { path, reads } = droppable(new Set());
    let release = (): void => {};
    reads.gate = new Promise<void>((resolve) => (release = resolve));
    const waiting = path.actors.handle({ type: 'agent.register', org: 'o', agent: { agent_id: 'a', name: 'A', kind: 'production', observed: true } });
    await new Promise((r) => setImmediate(r));
    expect(reads.count).toBe(1); // the writer is reading its ledger
    path.actors.forget(() => true);
    release();
    expect(await within(waiting, 5_000, () => 'never answered' as const)).toMatchObject({ ok: false, code: 'not_owner' });
    expect([...path.actors.depths()]).toEqual([]);
    expect(await path.rows('o')).toEqual([]);
  }, 20_000);
});
