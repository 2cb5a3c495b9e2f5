import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { canonicalize } from './jcs.js';

/**
 * C2SP signed notes and tlog checkpoints (DESIGN §10), with Ed25519 keys: the formats existing
 * witnesses and monitors read (c2sp.org/signed-note, c2sp.org/tlog-checkpoint).
 *
 * - key id: the first 4 bytes of SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key);
 * - verifier key: `<name>+<key id, 8 hex>+<base64(0x01 ‖ public key)>`;
 * - note: its text (ending in "\n"), a blank line, then one line per signature:
 *   `— <name> <base64(key id ‖ signature over the text)>`.
 */

const ED25519 = 0x01;
/** PKCS#8 DER of an Ed25519 private key, before its 32-byte seed (RFC 8410). */
const PKCS8_SEED_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SIGNATURE_LINE = /^\u2014 (\S+) ([A-Za-z0-9+/]+=*)$/;

export interface NoteKey {
  name: string;
  keyId: Buffer;
  publicKey: Buffer;
}

/** The Ed25519 key whose 32-byte seed is `seed` (RFC 8032: the same seed, the same key, the same signatures). */
export function ed25519FromSeed(seed: Uint8Array): KeyObject {
  if (seed.length !== 32) throw new RangeError('an Ed25519 seed is 32 bytes');
  return createPrivateKey({ key: Buffer.concat([PKCS8_SEED_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

/** The 32 raw bytes of an Ed25519 key's public half. */
export function rawPublicKey(key: KeyObject): Buffer {
  const jwk = (key.type === 'private' ? createPublicKey(key) : key).export({ format: 'jwk' });
  if (jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw new TypeError('not an Ed25519 key');
  return Buffer.from(jwk.x, 'base64url');
}

export function noteKey(name: string, publicKey: Buffer): NoteKey {
  const keyId = createHash('sha256').update(name).update('\n').update(Buffer.from([ED25519])).update(publicKey).digest().subarray(0, 4);
  return { name, keyId, publicKey };
}

export function verifierKey(key: NoteKey): string {
  return `${key.name}+${key.keyId.toString('hex')}+${Buffer.concat([Buffer.from([ED25519]), key.publicKey]).toString('base64')}`;
}

/** A verifier key line read back; null if it is not an Ed25519 key of this format or its id does not match. */
export function parseVerifierKey(text: string): NoteKey | null {
  // A name holds no '+'; the base64 after the id may.
  const match = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+=*)$/.exec(text.trim());
  if (match === null) return null;
  const raw = Buffer.from(match[3]!, 'base64');
  if (raw.length !== 33 || raw[0] !== ED25519) return null;
  const key = noteKey(match[1]!, raw.subarray(1));
  return key.keyId.toString('hex') === match[2] ? key : null;
}

/** Signs `text` (which must end in "\n") as a note of one signature. */
export function signNote(text: string, key: NoteKey, privateKey: KeyObject): string {
  if (!text.endsWith('\n')) throw new Error('a note text ends with a newline');
  const signature = sign(null, Buffer.from(text, 'utf8'), privateKey);
  return `${text}\n\u2014 ${key.name} ${Buffer.concat([key.keyId, signature]).toString('base64')}\n`;
}

/** The note's text if it carries a valid signature by `key` (others are ignored); otherwise null. */
export function openNote(note: string, key: NoteKey): string | null {
  const split = note.lastIndexOf('\n\n', note.length - 2);
  if (split < 0 || !note.endsWith('\n')) return null;
  const text = note.slice(0, split + 1);
  const publicKey = publicKeyOf(key);
  for (const line of note.slice(split + 2, -1).split('\n')) {
    const match = SIGNATURE_LINE.exec(line);
    if (match === null) return null;
    if (match[1] !== key.name) continue;
    const raw = Buffer.from(match[2]!, 'base64');
    if (raw.length !== 4 + 64 || !raw.subarray(0, 4).equals(key.keyId)) continue;
    if (verify(null, Buffer.from(text, 'utf8'), publicKey, raw.subarray(4))) return text;
  }
  return null;
}

export interface Checkpoint {
  origin: string;
  size: number;
  root: Buffer;
}

/** The checkpoint's note text: origin, size, base64 root, each on its line. */
export function checkpointText(c: Checkpoint): string {
  return `${c.origin}\n${c.size}\n${c.root.toString('base64')}\n`;
}

/** A checkpoint's text read back (extension lines after the root are allowed and ignored); null if malformed. */
export function parseCheckpoint(text: string): Checkpoint | null {
  const lines = text.split('\n');
  if (lines.length < 4 || lines[lines.length - 1] !== '') return null;
  const [origin, size, root] = lines as [string, string, string];
  if (origin === '' || !/^(0|[1-9][0-9]*)$/.test(size) || !Number.isSafeInteger(Number(size))) return null;
  const hash = Buffer.from(root, 'base64');
  if (hash.length !== 32 || hash.toString('base64') !== root) return null;
  return { origin, size: Number(size), root: hash };
}

export interface ReceiptFields {
  origin: string;
  seq: number;
  leaf_hash: string;
  recorded_at: string;
}

/** A signed receipt (DESIGN §10): where a record sits in its org's log, signed by the log key. */
export interface Receipt extends ReceiptFields {
  /** Base64 Ed25519 over the JCS of the other four fields. */
  signature: string;
}

/** A receipt's signature (DESIGN §10): base64 Ed25519 over the JCS of its other four fields. */
export function signReceipt(fields: ReceiptFields, privateKey: KeyObject): string {
  const { origin, seq, leaf_hash, recorded_at } = fields;
  return sign(null, Buffer.from(canonicalize({ origin, seq, leaf_hash, recorded_at }), 'utf8'), privateKey).toString('base64');
}

export function verifyReceipt(fields: ReceiptFields, signature: string, key: NoteKey): boolean {
  const { origin, seq, leaf_hash, recorded_at } = fields;
  const raw = Buffer.from(signature, 'base64');
  return raw.length === 64 && verify(null, Buffer.from(canonicalize({ origin, seq, leaf_hash, recorded_at }), 'utf8'), publicKeyOf(key), raw);
}

function publicKeyOf(key: NoteKey): KeyObject {
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.publicKey.toString('base64url') }, format: 'jwk' });
}
