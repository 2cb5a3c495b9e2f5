import { open, readFile, rename, unlink } from 'node:fs/promises';
import { z } from 'zod';
import type { Checkpoint } from '../domain/signed-note.js';

/** The last checkpoint a monitor accepted, and when it first saw it (ISO 8601). */
export interface SeenCheckpoint extends Checkpoint {
  seenAt: string;
}

/** The state file cannot be read, is not a monitor's, or cannot be written: the operator must look. */
export class StateFileError extends Error {
  override name = 'StateFileError';
  constructor(
    readonly code: 'unreadable' | 'malformed' | 'unwritable',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
  }
}

const stateFile = z.object({
  origin: z.string().min(1),
  size: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  root: z.string().regex(/^[0-9a-f]{64}$/, '64 lowercase hex characters'),
  seen_at: z.string().min(1),
});

/** The checkpoint recorded in `path`; null when there is no such file yet (a first run). */
export async function readState(path: string): Promise<SeenCheckpoint | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new StateFileError('unreadable', `cannot read the state file ${path}: ${(error as Error).message}`, { cause: error });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new StateFileError('malformed', `the state file ${path} is not JSON`, { cause: error });
  }
  const parsed = stateFile.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new StateFileError('malformed', `the state file ${path} is not a monitor's: ${issue?.path.join('.') || '(top)'}: ${issue?.message ?? 'invalid'}`);
  }
  const { origin, size, root, seen_at } = parsed.data;
  return { origin, size, root: Buffer.from(root, 'hex'), seenAt: seen_at };
}

/**
 * Replaces the state file with `seen`: written and synced beside it, then renamed over it, so a
 * crash or a concurrent reader finds the old state or the new one, never a part of either.
 */
export async function writeState(path: string, seen: SeenCheckpoint): Promise<void> {
  const json = `${JSON.stringify({ origin: seen.origin, size: seen.size, root: seen.root.toString('hex'), seen_at: seen.seenAt }, null, 2)}\n`;
  const temp = `${path}.${process.pid}.tmp`;
  try {
    const file = await open(temp, 'w', 0o644);
    try {
      await file.writeFile(json, 'utf8');
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw new StateFileError('unwritable', `cannot write the state file ${path}: ${(error as Error).message}`, { cause: error });
  }
}
