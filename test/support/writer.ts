import { OrgActors } from '../../src/actors/org-actors.js';
import type { OrgActorOptions } from '../../src/actors/org-ledger-actor.js';
import type { RequestOptions } from '../../src/bus/bus.js';
import { MemoryBus } from '../../src/bus/memory.js';
import type { OrgReply } from '../../src/bus/messages.js';
import { POLICY_V1, policyDigest } from '../../src/domain/policy.js';
import { LmdbStore } from '../../src/store/lmdb.js';
import { removeDir, tempDir } from './server.js';
import { silentLogger } from './logs.js';

/** An org writer on a real LMDB store in a temp dir, with org `o` and its agent `a` registered. */
export interface Writer {
  dir: string;
  store: LmdbStore;
  bus: MemoryBus;
  /** An `output_generated` event of agent `a` with this payload. */
  ingest(payload?: Record<string, unknown>, options?: RequestOptions): Promise<OrgReply>;
  /** Every row of org `o`, in order. */
  rows(): Promise<{ seq: number; kind: string }[]>;
}

/** Runs `test` against a fresh writer, and removes everything after it. */
export async function withWriter(test: (w: Writer) => Promise<void>, options: Partial<OrgActorOptions> = {}): Promise<void> {
  const dir = tempDir('vigil-writer-');
  const store = new LmdbStore(dir);
  const bus = new MemoryBus(store, silentLogger());
  const actors = new OrgActors(bus, { log: silentLogger(), policy: POLICY_V1, policyDigest: policyDigest(POLICY_V1), now: Date.now, maxPending: 1000, ...options });
  bus.serve(actors.handle);
  const writer: Writer = {
    dir,
    store,
    bus,
    ingest: (payload = {}, request) =>
      bus.request({ type: 'event.ingest', org: 'o', event: { agent_id: 'a', event_type: 'output_generated', payload, dti: null, source: 'self', actor: null } }, request),
    async rows() {
      const rows = [];
      for await (const chunk of bus.read('o', 1)) rows.push(...chunk);
      return rows;
    },
  };
  try {
    await bus.request({ type: 'agent.register', org: 'o', agent: { agent_id: 'a', name: 'A', kind: 'production', observed: true } });
    await test(writer);
  } finally {
    await bus.close();
    await store.close();
    removeDir(dir);
  }
}
