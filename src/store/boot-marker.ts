import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The boot marker of a store that is not synced (the Merkle trees' environment, see
 * openMerkleStore): a `state.json` beside its files saying whether it is open, and since which
 * boot of the machine. A process that dies leaves its writes in the kernel's page cache; a machine
 * that loses power may leave the files torn, which the marker then tells.
 */
const STATE_FILE = 'state.json';
/** The state file's length: its JSON, padded with spaces. */
const STATE_BYTES = 128;

export interface BootState {
  /** The kernel's boot id when the store was last opened (null where there is none). */
  boot: string | null;
  /** True from open until a clean close has flushed every write to disk. */
  open: boolean;
}

/**
 * Why the store in `dir` (which has data) may be torn, or null: no readable marker, or open since
 * another boot (or with no boot id to tell).
 */
export function tornReason(dir: string, boot: string | null): string | null {
  const state = readState(dir);
  if (state === null) return 'it has no readable state file';
  return state.open && (state.boot === null || state.boot !== boot) ? 'it was not closed cleanly before the machine restarted' : null;
}

function readState(dir: string): BootState | null {
  try {
    const state = JSON.parse(readFileSync(join(dir, STATE_FILE), 'utf8')) as Partial<BootState>;
    return typeof state.open === 'boolean' && (typeof state.boot === 'string' || state.boot === null) ? { boot: state.boot, open: state.open } : null;
  } catch {
    return null;
  }
}

/**
 * Writes the state file in place, padded to STATE_BYTES, and syncs it: once the file exists this
 * needs no new disk space (a full disk must not stop a start or a clean close). A write torn by a
 * machine crash leaves it unreadable, which reads as damaged: the safe side.
 */
export function writeState(dir: string, state: BootState): void {
  const path = join(dir, STATE_FILE);
  const created = !existsSync(path);
  const fd = openSync(path, created ? 'w' : 'r+');
  try {
    writeSync(fd, Buffer.from(JSON.stringify(state).padEnd(STATE_BYTES)), 0, STATE_BYTES, 0);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  if (created) syncFile(dir);
}

export function syncFile(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** This boot of the machine (Linux), or null where the kernel does not say. */
export function bootId(): string | null {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return null;
  }
}
