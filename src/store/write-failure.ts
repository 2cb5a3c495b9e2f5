import { VigilError } from '../errors.js';

/**
 * Awaits an lmdb-js write and turns its failure (a commit refused by a full disk or an I/O error)
 * into a retryable `unavailable` refusal.
 *
 * lmdb-js attaches to every error of a failed commit a `commitError` promise that rejects with the
 * underlying cause and that nothing else awaits: left alone, that rejection is unhandled and ends
 * the process. Every write of this adapter goes through here, so a failed commit costs the
 * requests it carried, never the process.
 */
export async function storeWrite<T>(write: PromiseLike<T>): Promise<T> {
  try {
    return await write;
  } catch (error) {
    throw storeWriteFailed(error);
  }
}

export function storeWriteFailed(error: unknown): VigilError {
  if (error instanceof VigilError) return error;
  const commitError = (error as { commitError?: unknown } | null)?.commitError;
  if (commitError instanceof Promise) commitError.catch(() => {});
  return new VigilError('unavailable', 'the store could not write (disk full or I/O error); nothing was recorded, retry', undefined, {
    cause: error,
    retryAfterSeconds: 1,
  });
}
