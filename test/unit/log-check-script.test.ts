import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { checkpointText, ed25519FromSeed, noteKey, rawPublicKey, signNote, verifierKey } from '../../src/domain/signed-note.js';
import { judge, openNote, parseCheckpoint, parseVerifierKey, proofHashes, verifyConsistency } from '../../src/http/pages/log-check.js';

// The agent page's script (plain browser JavaScript) run by Node's WebCrypto against the same
// vectors as the server's verifier (merkle-v1.json, checkpoint-v1.json) and against notes the
// server's code signs: the browser and the server must agree on every byte.

interface VectorTree {
  name: string;
  roots: Record<string, string>;
  consistency: { from: number; to: number; hashes: string[] }[];
}
const merkle = JSON.parse(readFileSync(new URL('../fixtures/merkle-v1.json', import.meta.url), 'utf8')) as { trees: VectorTree[] };
const checkpoint = JSON.parse(readFileSync(new URL('../fixtures/checkpoint-v1.json', import.meta.url), 'utf8')) as { seed_hex: string; vkey: string; checkpoint: string };

const bytes = (hex: string): Uint8Array => new Uint8Array(Buffer.from(hex, 'hex'));
const rootOf = (tree: VectorTree, size: number): Uint8Array => bytes(tree.roots[String(size)]!);

/** The note with one byte of its last signature changed. */
function withBadSignature(note: string): string {
  const lines = note.split('\n');
  const last = lines.length - 2;
  const [dash, name, sig] = lines[last]!.split(' ') as [string, string, string];
  const raw = Buffer.from(sig, 'base64');
  raw[20] = raw[20]! ^ 0x01;
  lines[last] = `${dash} ${name} ${raw.toString('base64')}`;
  return lines.join('\n');
}

describe('the page script: RFC 9162 consistency proofs (merkle-v1.json)', () => {
  for (const tree of merkle.trees) {
    it(`${tree.name}: accepts every proof and rejects each one changed`, async () => {
      expect(tree.consistency.length).toBeGreaterThan(0);
      for (const { from, to, hashes } of tree.consistency) {
        const proof = hashes.map(bytes);
        expect(await verifyConsistency(from, to, rootOf(tree, from), rootOf(tree, to), proof), `${from}→${to}`).toBe(true);
        for (let i = 0; i < proof.length; i++) {
          const bad = proof.map((h) => h.slice());
          const changed = bad[i]!;
          changed[i % 32] = changed[i % 32]! ^ 0x01;
          expect(await verifyConsistency(from, to, rootOf(tree, from), rootOf(tree, to), bad), `${from}→${to}, hash ${i} changed`).toBe(false);
        }
        if (from < to) {
          expect(await verifyConsistency(from, to, rootOf(tree, to), rootOf(tree, to), proof), `${from}→${to}, another old root`).toBe(false);
          expect(await verifyConsistency(from, to, rootOf(tree, from), rootOf(tree, from), proof), `${from}→${to}, another new root`).toBe(false);
          expect(await verifyConsistency(from, to, rootOf(tree, from), rootOf(tree, to), proof.slice(0, -1)), `${from}→${to}, shortened`).toBe(false);
        }
      }
    });
  }

  it('checks proofs of logs past 2^32 records (no 32-bit arithmetic on sizes)', async () => {
    // RFC 9162 §2.1.4 by hand, from 3·2^31 to 3·2^31 + 1 leaves (3·2^31 is no power of two, though
    // a 32-bit mask says it is): B = MTH(D[0:2^32]), A = MTH(D[2^32:3·2^31]), L = the new leaf.
    const node = (left: Uint8Array, right: Uint8Array): Uint8Array => new Uint8Array(createHash('sha256').update(Buffer.from([1])).update(left).update(right).digest());
    const [a, b, l] = ['a', 'b', 'l'].map((s) => new Uint8Array(createHash('sha256').update(s).digest())) as [Uint8Array, Uint8Array, Uint8Array];
    const from = 3 * 2 ** 31;
    expect(await verifyConsistency(from, from + 1, node(b, a), node(b, node(a, l)), [a, l, b])).toBe(true);
    expect(await verifyConsistency(from, from + 1, node(b, a), node(b, node(a, a)), [a, l, b])).toBe(false);
    // From 2^32 (a power of two) to 2^32 + 1: the proof is the new leaf alone.
    expect(await verifyConsistency(2 ** 32, 2 ** 32 + 1, b, node(b, l), [l])).toBe(true);
  });

  it('reads a proof answer only for the sizes asked, with 32-byte hex hashes', () => {
    const hash = 'ab'.repeat(32);
    expect(proofHashes({ from: 2, to: 5, hashes: [hash] }, 2, 5)).toEqual([bytes(hash)]);
    expect(proofHashes({ from: 1, to: 5, hashes: [hash] }, 2, 5)).toBeNull();
    expect(proofHashes({ from: 2, to: 5, hashes: ['AB'.repeat(32)] }, 2, 5)).toBeNull();
    expect(proofHashes({ from: 2, to: 5, hashes: [hash.slice(2)] }, 2, 5)).toBeNull();
    expect(proofHashes({ from: 2, to: 5 }, 2, 5)).toBeNull();
    expect(proofHashes(null, 2, 5)).toBeNull();
  });
});

describe('the page script: signed notes and checkpoints', () => {
  it('opens the checkpoint-v1 vector with its verifier key, and reads the ledger-v1 root at size 5', async () => {
    const key = await parseVerifierKey(checkpoint.vkey);
    expect(key?.name).toBe('vigil.example/vigil/acme');
    const text = await openNote(checkpoint.checkpoint, key!);
    expect(text).toBe(checkpoint.checkpoint.slice(0, checkpoint.checkpoint.indexOf('\n\n') + 1));
    const ledgerV1 = merkle.trees.find((t) => t.name === 'ledger-v1')!;
    expect(parseCheckpoint(text!)).toEqual({ origin: 'vigil.example/vigil/acme', size: 5, root: rootOf(ledgerV1, 5) });
    expect(await openNote(withBadSignature(checkpoint.checkpoint), key!)).toBeNull();
  });

  it("refuses a verifier key whose id does not match its name and key, or that is not Ed25519", async () => {
    const [name, id, raw] = checkpoint.vkey.split('+') as [string, string, string];
    expect(await parseVerifierKey(`${name}x+${id}+${raw}`)).toBeNull();
    expect(await parseVerifierKey(`${name}+00000000+${raw}`)).toBeNull();
    const notEd25519 = Buffer.from(raw, 'base64');
    notEd25519[0] = 0x02;
    expect(await parseVerifierKey(`${name}+${id}+${notEd25519.toString('base64')}`)).toBeNull();
  });

  it('opens a note as the server signs it (two lines, origin and prefix) with the published prefix key only', async () => {
    const privateKey = ed25519FromSeed(bytes(checkpoint.seed_hex));
    const publicKey = rawPublicKey(privateKey);
    const prefix = noteKey('vigil.example/vigil', publicKey);
    const text = checkpointText({ origin: 'vigil.example/vigil/acme', size: 7, root: Buffer.alloc(32, 9) });
    const note = signNote(text, noteKey('vigil.example/vigil/acme', publicKey), privateKey) + signNote(text, prefix, privateKey).slice(text.length + 1);
    const key = await parseVerifierKey(verifierKey(prefix));
    expect(await openNote(note, key!)).toBe(text);
    expect(await openNote(withBadSignature(note), key!)).toBeNull();
    // Another key under the same name: its id differs, so no line is taken.
    const other = noteKey('vigil.example/vigil', rawPublicKey(ed25519FromSeed(Buffer.alloc(32, 1))));
    expect(await openNote(note, (await parseVerifierKey(verifierKey(other)))!)).toBeNull();
  });

  it('reads a checkpoint text only when well formed', () => {
    const root = Buffer.alloc(32, 3).toString('base64');
    expect(parseCheckpoint(`o/vigil/a\n12\n${root}\n`)?.size).toBe(12);
    expect(parseCheckpoint(`o/vigil/a\n12\n${root}\next\n`)?.size).toBe(12);
    expect(parseCheckpoint(`o/vigil/a\n012\n${root}\n`)).toBeNull();
    expect(parseCheckpoint(`o/vigil/a\n12\n${root}`)).toBeNull();
    expect(parseCheckpoint(`o/vigil/a\n12\n${Buffer.alloc(31).toString('base64')}\n`)).toBeNull();
    expect(parseCheckpoint(`\n12\n${root}\n`)).toBeNull();
  });
});

describe('the page script: judging a checkpoint against the one remembered', () => {
  const tree = merkle.trees.find((t) => t.name === 'rfc6962')!;
  const at = (size: number): { size: number; root: Uint8Array } => ({ size, root: rootOf(tree, size) });
  const proofs = (from: number, to: number): Promise<Uint8Array[] | null> =>
    Promise.resolve(tree.consistency.find((c) => c.from === from && c.to === to)?.hashes.map(bytes) ?? null);
  const noProof = (): Promise<Uint8Array[] | null> => Promise.reject(new Error('no proof is needed'));

  it('passes an unchanged log and a grown one with a good proof', async () => {
    expect(await judge(at(5), at(5), noProof)).toBe('unchanged');
    expect(await judge(at(3), at(8), proofs)).toBe('consistent');
    expect(await judge({ size: 0, root: new Uint8Array(32) }, at(4), noProof)).toBe('consistent');
  });

  it('names each fork: a smaller log, two roots for one size, a proof that fails or is missing', async () => {
    expect(await judge(at(6), at(5), noProof)).toBe('shrunk');
    expect(await judge(at(5), { size: 5, root: rootOf(tree, 4) }, noProof)).toBe('two-roots');
    expect(await judge({ size: 3, root: rootOf(tree, 2) }, at(8), proofs)).toBe('proof-fails');
    expect(await judge(at(3), at(8), () => Promise.resolve(null))).toBe('proof-fails');
  });
});
