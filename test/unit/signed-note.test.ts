import { createHash, generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../src/domain/jcs.js';
import { GENESIS_HASH, leafInput, makeRow } from '../../src/domain/ledger.js';
import { leafHash, MemoryTree, rootAt } from '../../src/domain/merkle.js';
import {
  checkpointText,
  ed25519FromSeed,
  noteKey,
  openNote,
  parseCheckpoint,
  parseVerifierKey,
  rawPublicKey,
  signNote,
  signReceipt,
  verifierKey,
  verifyReceipt,
} from '../../src/domain/signed-note.js';

// DESIGN §10 vector (shared/vectors/checkpoint-v1.json, copied): a checkpoint of the ledger-v1 tree
// at size 5 and a receipt for seq 5, from a test key whose seed is published. Ed25519 is
// deterministic, so the bytes must come out exactly.
const vector = JSON.parse(readFileSync(new URL('../fixtures/checkpoint-v1.json', import.meta.url), 'utf8')) as {
  seed_hex: string;
  vkey: string;
  checkpoint: string;
  receipt: { leaf_hash: string; origin: string; recorded_at: string; seq: number; signature: string; signed_bytes: string };
};
const ledgerV1 = readFileSync(new URL('../fixtures/ledger-v1.jsonl', import.meta.url), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
const ORIGIN = 'vigil.example/vigil/acme';

const seed = Buffer.from(vector.seed_hex, 'hex');
const privateKey = ed25519FromSeed(seed);
const key = noteKey(ORIGIN, rawPublicKey(privateKey));

/** A ledger-v1 record's leaf input, from its exported fields. */
function leafInputOf(r: Record<string, unknown>): Buffer {
  return leafInput({ seq: r.seq as number, kind: r.kind as string, recordedAt: r.recorded_at as string, agentId: r.agent_id as string | null, bodyJson: canonicalize(r.body) });
}

function ledgerV1Tree(): MemoryTree {
  const tree = new MemoryTree();
  for (const r of ledgerV1) tree.append(leafHash(leafInputOf(r)));
  return tree;
}

describe('signed notes and checkpoints: the vector (checkpoint-v1.json)', () => {
  it('derives the test key from the published seed, and its verifier key character for character', () => {
    expect(createHash('sha256').update('vigil test log key').digest('hex')).toBe(vector.seed_hex);
    expect(verifierKey(key)).toBe(vector.vkey);
    expect(parseVerifierKey(vector.vkey)).toEqual(key);
  });

  it('signs the ledger-v1 checkpoint at size 5 to exactly the published note', () => {
    const text = checkpointText({ origin: ORIGIN, size: 5, root: rootAt(ledgerV1Tree()) });
    expect(signNote(text, key, privateKey)).toBe(vector.checkpoint);
    expect(openNote(vector.checkpoint, key)).toBe(text);
    expect(parseCheckpoint(text)).toEqual({ origin: ORIGIN, size: 5, root: rootAt(ledgerV1Tree()) });
  });

  it('signs the receipt for seq 5 to exactly the published signature, over the published bytes', () => {
    const { signature, signed_bytes, ...fields } = vector.receipt;
    expect(canonicalize(fields)).toBe(signed_bytes);
    expect(fields.leaf_hash).toBe(leafHash(leafInputOf(ledgerV1[4]!)).toString('hex'));
    expect(signReceipt(fields, privateKey)).toBe(signature);
    expect(verifyReceipt(fields, signature, key)).toBe(true);
    expect(verifyReceipt({ ...fields, seq: 4 }, signature, key)).toBe(false);
  });
});

describe('opening notes', () => {
  const text = checkpointText({ origin: ORIGIN, size: 5, root: rootAt(ledgerV1Tree()) });
  const note = signNote(text, key, privateKey);

  it('refuses a note whose text, signature or key differ', () => {
    expect(openNote(note.replace('\n5\n', '\n6\n'), key)).toBeNull();
    const sig = note.slice(note.lastIndexOf(' ') + 1, -1);
    const flipped = Buffer.from(sig, 'base64');
    flipped[10]! ^= 0x01;
    expect(openNote(note.replace(sig, flipped.toString('base64')), key)).toBeNull();
    const other = generateKeyPairSync('ed25519').privateKey;
    expect(openNote(note, noteKey(ORIGIN, rawPublicKey(other)))).toBeNull();
    // The same public key under another name has another key id: not this key's signature.
    expect(openNote(note, noteKey('other.example/log', key.publicKey))).toBeNull();
    expect(openNote(text, key)).toBeNull();
    expect(openNote('', key)).toBeNull();
  });

  it('finds its own signature among others (a witness cosigning), and ignores the others', () => {
    const other = generateKeyPairSync('ed25519').privateKey;
    const witness = noteKey('witness.example', rawPublicKey(other));
    const cosigned = signNote(text, witness, other) + note.slice(text.length + 1);
    expect(openNote(cosigned, key)).toBe(text);
    expect(openNote(cosigned, witness)).toBe(text);
  });

  it('reads back only well-formed checkpoints and verifier keys', () => {
    expect(parseCheckpoint('a\n5\nnotbase64\n')).toBeNull();
    expect(parseCheckpoint(`a\n05\n${Buffer.alloc(32).toString('base64')}\n`)).toBeNull();
    expect(parseCheckpoint(`a\n5\n${Buffer.alloc(32).toString('base64')}`)).toBeNull();
    expect(parseCheckpoint(`a\n5\n${Buffer.alloc(32).toString('base64')}\nextension line\n`)).toEqual({ origin: 'a', size: 5, root: Buffer.alloc(32) });
    expect(parseVerifierKey(vector.vkey.replace('+b4afa34e+', '+b4afa34f+'))).toBeNull();
    expect(parseVerifierKey('name+b4afa34e')).toBeNull();
  });

  it('makes keys whose checkpoints verify over a real ledger tree', () => {
    const tree = new MemoryTree();
    let prev = GENESIS_HASH;
    for (let seq = 1; seq <= 20; seq++) {
      const row = makeRow(prev, seq, 'event', '2026-11-01T00:00:00.000Z', 'a', { seq });
      tree.append(leafHash(leafInput(row)));
      prev = row.chainHash;
    }
    const fresh = generateKeyPairSync('ed25519').privateKey;
    const k = noteKey('vigil.test/vigil/org', rawPublicKey(fresh));
    const signed = signNote(checkpointText({ origin: k.name, size: 20, root: rootAt(tree) }), k, fresh);
    const opened = openNote(signed, parseVerifierKey(verifierKey(k))!);
    expect(parseCheckpoint(opened!)?.root.equals(rootAt(tree))).toBe(true);
  });
});
