interface Closable {
  close(): Promise<void>;
}

/**
 * Waits for every opening; if any fails, closes those that opened (so no watch outlives a failed
 * start) and throws the first failure.
 */
export async function openAll<const T extends readonly Promise<Closable>[]>(opening: T): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(opening);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed === undefined) return settled.map((s) => (s as PromiseFulfilledResult<Closable>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
  const opened = settled.filter((s): s is PromiseFulfilledResult<Closable> => s.status === 'fulfilled');
  await Promise.all(opened.map((s) => s.value.close().catch(() => undefined)));
  throw failed.reason;
}
