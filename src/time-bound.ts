/** Bounds on how long something is awaited: the work goes on, the waiter does not wait for it. */

/** Whether `promise` settles within `ms` ('late' if not); its rejection within `ms` is thrown as it is. */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<'settled' | 'late'> {
  return within(promise.then(() => 'settled' as const), ms, () => 'late' as const);
}

/** `promise`'s value, or `late()`'s if it has not settled within `ms` (a `late` that throws rejects). */
export async function within<T, L>(promise: Promise<T>, ms: number, late: () => L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<L>((resolve, reject) => {
    timer = setTimeout(() => {
      try {
        resolve(late());
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    }, Math.max(0, ms));
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
