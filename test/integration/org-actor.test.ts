import { afterEach, describe, expect, it } from 'vitest';
import { OrgActors } from '../../src/actors/org-actors.js';
import type { Bus } from '../../src/bus/bus.js';
import { MemoryBus } from '../../src/bus/memory.js';
import type { IngestResult } from '../../src/bus/messages.js';
import { ChainVerifier } from '../../src/domain/ledger.js';
import { POLICY_V1, policyDigest } from '../../src/domain/policy.js';
import { LmdbStore } from '../../src/store/lmdb.js';
import { removeDir, tempDir } from '../support/server.js';
import { silentLogger } from '../support/logs.js';

/** A bus whose chosen appends fail before reaching the store, as a failing disk would. */
function flaky(inner: Bus, failOn: Set<number>): Bus {
  let n = 0;
  return {
    serve: (h) => inner.serve(h),
    request: (c) => inner.request(c),
    read: (org, from) => inner.read(org, from),
    subscribe: (h) => inner.subscribe(h),
    close: () => inner.close(),
    append: (org, rows, expected) => (failOn.has(++n) ? Promise.reject(new Error('EIO: disk on fire')) : inner.append(org, rows, expected)),
  };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function setup(failOn: number[], maxInflight = 4) {
  const dir = tempDir('vigil-actor-');
  const store = new LmdbStore(dir);
  const bus = flaky(new MemoryBus(store, silentLogger()), new Set(failOn));
  const actors = new OrgActors(bus, { log: silentLogger(), policy: POLICY_V1, policyDigest: policyDigest(POLICY_V1), now: Date.now, maxPending: 100_000, maxInflight });
  bus.serve(actors.handle);
  cleanups.push(async () => {
    await store.close();
    removeDir(dir);
  });
  return { store, bus };
}

const ingest = (n: number) => ({
  type: 'event.ingest' as const,
  org: 'o',
  event: { agent_id: 'a', event_type: 'output_generated' as const, payload: { n }, dti: null, source: 'self' as const, actor: null },
});

describe('org ledger actor under append failures', () => {
  it('refuses the failed batch and those in flight behind it, leaves no gap, and carries on', async () => {
    const { store, bus } = await setup([3, 7]);
    await bus.request({ type: 'agent.register', org: 'o', agent: { agent_id: 'a', name: 'A', kind: 'production', observed: true } });
    const acked = new Map<number, number>();
    let refused = 0;
    const client = async (c: number) => {
      for (let i = 0; i < 40; i++) {
        const n = c * 1000 + i;
        const reply = await bus.request(ingest(n));
        if (reply.ok) acked.set((reply.value as IngestResult).event_id, n);
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
    expect(next.ok && (next.value as IngestResult).event_id).toBe(1);
    expect(store.last('o')?.seq).toBe(2);
  });
});
