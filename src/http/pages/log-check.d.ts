// Types of what log-check.js (plain browser JavaScript, served as it is) exports for its tests.

export interface BrowserNoteKey {
  name: string;
  keyId: Uint8Array;
  publicKey: Uint8Array;
}

export interface BrowserCheckpoint {
  origin: string;
  size: number;
  root: Uint8Array;
}

export type Judgement = 'unchanged' | 'consistent' | 'shrunk' | 'two-roots' | 'proof-fails';

export function fromBase64(text: string): Uint8Array | null;
export function toBase64(bytes: Uint8Array): string;
export function parseVerifierKey(text: string): Promise<BrowserNoteKey | null>;
export function openNote(note: string, key: BrowserNoteKey): Promise<string | null>;
export function parseCheckpoint(text: string): BrowserCheckpoint | null;
export function verifyConsistency(from: number, to: number, fromRoot: Uint8Array, toRoot: Uint8Array, proof: readonly Uint8Array[]): Promise<boolean>;
export function proofHashes(answer: unknown, from: number, to: number): Uint8Array[] | null;
export function judge(
  seen: { size: number; root: Uint8Array },
  next: { size: number; root: Uint8Array },
  proofOf: (from: number, to: number) => Promise<Uint8Array[] | null>,
): Promise<Judgement>;
