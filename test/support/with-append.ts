import type { LedgerLog } from '../../src/bus/ledger-log.js';

/** `inner` with its append replaced (failing, counting or delaying appends in a test); everything else passes through. */
export function withAppend(inner: LedgerLog, append: LedgerLog['append']): LedgerLog {
  return {
    capabilities: inner.capabilities,
    fenceAfter: inner.fenceAfter?.bind(inner),
    ...(inner.together === undefined ? {} : { together: inner.together.bind(inner) }),
    read: (org, from) => inner.read(org, from),
    positionAfter: (held) => inner.positionAfter(held),
    subscribe: (h, from) => inner.subscribe(h, from),
    close: () => inner.close(),
    append,
  };
}
