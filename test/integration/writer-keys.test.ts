import { afterEach, describe, expect, it } from 'vitest';
import type { OrgReply } from '../../src/bus/messages.js';
import type { KeyedEvent } from '../../src/domain/idempotency.js';
import { embedded, type Embedded } from '../support/embedded.js';
import { removeDir, tempDir } from '../support/server.js';

/**
 * Embedded mode keeps no idempotency key of a durable row in the writers' memory
 * (`recentKeysKept: 0`, as runtime.ts sets it): the store's index, written in the row's own
 * transaction, answers a retry instead. Keys of rows not yet durable stay in memory (the store
 * cannot answer them), so a retry in flight with its first is still answered as the first.
 */
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

const keyed = (n: number) => ({
  type: 'event.ingest' as const,
  org: 'o',
  event: { agent_id: 'a', event_type: 'output_generated' as const, payload: { n }, dti: null, source: 'self' as const, actor: null, idempotency_key: `k-${n}` },
});

describe('idempotency keys of durable rows come from the store (real LMDB)', () => {
  it('a retry after its first is durable is answered from the store index, one in flight with it from memory, each as the first', async () => {
    const dir = tempDir('vigil-writer-keys-');
    const found: string[] = [];
    let path: Embedded | null = null;
    const findKey = (org: string, key: string): KeyedEvent | undefined => {
      const hit = path!.stores.ledger.findKey(org, key);
      if (hit !== undefined) found.push(key);
      return hit;
    };
    path = embedded(dir, { recentKeysKept: 0, findKey });
    cleanups.push(async () => {
      await path.close();
      removeDir(dir);
    });
    expect((await path.commands.request({ type: 'agent.register', org: 'o', agent: { agent_id: 'a', name: 'A', kind: 'production', observed: true } })).ok).toBe(true);
    // The first and a retry in one turn: the retry is decided while the first is in flight.
    const [first, inFlight] = (await Promise.all([path.commands.request(keyed(1)), path.commands.request(keyed(1))])) as OrgReply[];
    expect(first!.ok).toBe(true);
    expect(inFlight).toEqual(first);
    expect(found).toEqual([]);
    const later = (await path.commands.request(keyed(1))) as OrgReply;
    expect(later).toEqual(first);
    expect(found).toEqual(['k-1']);
    expect((await path.rows('o')).map((r) => r.seq)).toEqual([1, 2]);
  });
});
