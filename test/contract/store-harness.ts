/** One adapter of a store port under test, over storage of its own. */
export interface StoreHarness<S> {
  store: S;
  /**
   * Another store over the same storage: another process on the data dir (LMDB), another node
   * on its own connection (KV). It may see the first one's writes a little later (a KV watch),
   * never wrongly.
   */
  other(): Promise<S>;
  dispose(): Promise<void>;
}

/** Runs a case against a fresh harness, disposed of whatever happens. */
export function withHarness<S>(make: () => Promise<StoreHarness<S>>, body: (h: StoreHarness<S>) => Promise<void>) {
  return async (): Promise<void> => {
    const h = await make();
    try {
      await body(h);
    } finally {
      await h.dispose();
    }
  };
}

/** How long another store may take to see a write (a KV watch: milliseconds; this is the bound). */
export const SEEN_WITHIN = { timeout: 5000, interval: 5 };
