import type { OrgActorOptions } from '../../src/actors/org-ledger-actor.js';
import type { RequestOptions } from '../../src/bus/command-router.js';
import type { OrgReply } from '../../src/bus/messages.js';
import { embedded, type Embedded } from './embedded.js';
import { removeDir, tempDir } from './server.js';

/** An org writer on a real LMDB store in a temp dir, with org `o` and its agent `a` registered. */
export interface Writer {
  dir: string;
  path: Embedded;
  /** An `output_generated` event of agent `a` with this payload. */
  ingest: (payload?: Record<string, unknown>, options?: RequestOptions) => Promise<OrgReply>;
  /** Every row of org `o`, in order. */
  rows: () => Promise<{ seq: number; kind: string }[]>;
}

/** Runs `test` against a fresh writer, and removes everything after it. */
export async function withWriter(test: (w: Writer) => Promise<void>, options: Partial<OrgActorOptions> = {}): Promise<void> {
  const dir = tempDir('vigil-writer-');
  const path = embedded(dir, options);
  const writer: Writer = {
    dir,
    path,
    ingest: (payload = {}, request) =>
      path.commands.request({ type: 'event.ingest', org: 'o', event: { agent_id: 'a', event_type: 'output_generated', payload, dti: null, source: 'self', actor: null } }, request),
    rows: () => path.rows('o'),
  };
  try {
    await path.commands.request({ type: 'agent.register', org: 'o', agent: { agent_id: 'a', name: 'A', kind: 'production', observed: true } });
    await test(writer);
  } finally {
    await path.close();
    removeDir(dir);
  }
}
