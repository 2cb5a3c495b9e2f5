import { verifyConsistency } from './merkle-verify.js';
import { openNote, parseCheckpoint, type Checkpoint, type NoteKey } from './signed-note.js';

/**
 * What a monitor of an org's transparency log decides about each checkpoint it is shown
 * (DESIGN §10), from the note, the verifier key, the last checkpoint it accepted and, when the
 * log grew, a consistency proof. Pure; every outcome is a value. An alarm is evidence against the
 * log (a fork, a signature or origin that does not check) and must never advance what the monitor
 * remembers.
 */

export type Opened =
  | { ok: true; checkpoint: Checkpoint }
  /** `claimed`: what the unsigned text says, for the report (null if it is not a checkpoint either). */
  | { ok: false; problem: 'signature'; claimed: Checkpoint | null }
  | { ok: false; problem: 'malformed' }
  | { ok: false; problem: 'origin'; origin: string; expected: string };

/**
 * The checkpoint in `note` if `key` signed it and it is the log of `org`: its origin is
 * `<host>/vigil/<org>`, under the key's name (the published key is named `<host>/vigil`; a key
 * named by the origin itself is taken too).
 */
export function openCheckpoint(note: string, key: NoteKey, org: string): Opened {
  const text = openNote(note, key);
  if (text === null) return { ok: false, problem: 'signature', claimed: parseCheckpoint(unsignedText(note)) };
  const checkpoint = parseCheckpoint(text);
  if (checkpoint === null) return { ok: false, problem: 'malformed' };
  const expected = key.name.endsWith(`/vigil/${org}`) ? key.name : `${key.name}/${org}`;
  if (checkpoint.origin !== expected || !expected.endsWith(`/vigil/${org}`)) return { ok: false, problem: 'origin', origin: checkpoint.origin, expected };
  return { ok: true, checkpoint };
}

/** A note's text before its signatures, as far as it can be told without checking them. */
export function unsignedText(note: string): string {
  const split = note.lastIndexOf('\n\n', note.length - 2);
  return split < 0 ? '' : note.slice(0, split + 1);
}

export type Verdict =
  /** The same size and root as the one seen. */
  | { type: 'unchanged' }
  /** Larger, and proven to extend the one seen (or the one seen was empty). */
  | { type: 'consistent' }
  /** The one seen is another log's checkpoint: nothing can be compared. */
  | { type: 'other-log' }
  /** Alarms: smaller than the one seen, another root for its size, or a proof that fails. */
  | { type: 'fork'; problem: 'shrunk' | 'two-roots' | 'proof-fails' };

/** Whether judging `next` against `seen` needs a consistency proof from seen.size to next.size. */
export function needsProof(seen: Checkpoint, next: Checkpoint): boolean {
  return seen.origin === next.origin && seen.size > 0 && next.size > seen.size;
}

/** `next` (already opened) judged against `seen`; `proof` is the one `needsProof` asked for, else ignored. */
export function judge(seen: Checkpoint, next: Checkpoint, proof: readonly Uint8Array[] | null): Verdict {
  if (seen.origin !== next.origin) return { type: 'other-log' };
  if (next.size < seen.size) return { type: 'fork', problem: 'shrunk' };
  if (next.size === seen.size) return seen.root.equals(next.root) ? { type: 'unchanged' } : { type: 'fork', problem: 'two-roots' };
  // Every tree extends the empty one.
  if (seen.size === 0) return { type: 'consistent' };
  return proof !== null && verifyConsistency(seen.size, next.size, seen.root, next.root, proof) ? { type: 'consistent' } : { type: 'fork', problem: 'proof-fails' };
}
