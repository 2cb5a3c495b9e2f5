import type { CommittedBatch, Fence, LedgerLog } from '../../src/bus/ledger-log.js';

/**
 * A real ledger log seen as a remote one would be: no capabilities (no pipelined appends, no
 * local delivery) and fences that are not seqs (LMDB's fence f shows as f × 1000 + 7). The
 * writer and the contract must hold with it, as they must with JetStream's stream sequences.
 */
export function opaqueLog(inner: LedgerLog): LedgerLog {
  const out = (fence: Fence): Fence => (fence === 0 ? 0 : fence * 1000 + 7);
  const into = (fence: Fence): Fence => (fence === 0 ? 0 : (fence - 7) / 1000);
  const batch = (b: CommittedBatch): CommittedBatch => ({ ...b, fence: out(b.fence) });
  return {
    capabilities: [],
    async append(org, rows, expected) {
      const real = into(expected);
      if (!Number.isInteger(real)) return { ok: false, reason: 'conflict' };
      const outcome = await inner.append(org, rows, real);
      return outcome.ok ? { ok: true, fence: out(outcome.fence) } : outcome;
    },
    async *read(org, fromSeq) {
      for await (const b of inner.read(org, fromSeq)) yield batch(b);
    },
    positionAfter: (held) => inner.positionAfter(held),
    async subscribe(handler, from) {
      let live = false;
      const subscription = await inner.subscribe((b) => {
        // Live batches come after the append resolved, as from a remote log.
        if (live) void Promise.resolve(batch(b)).then(handler).catch(() => undefined);
        else handler(batch(b));
      }, from);
      live = true;
      return subscription;
    },
    close: () => inner.close(),
  };
}
