import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { LogCheckpoints, type PublishedCheckpoint } from '../../src/actors/log-checkpoints.js';
import type { MerkleTrees } from '../../src/actors/merkle-trees.js';
import { leafHash, MemoryTree } from '../../src/domain/merkle.js';
import { ed25519FromSeed, noteKey, openNote, parseCheckpoint, parseVerifierKey, rawPublicKey } from '../../src/domain/signed-note.js';
import { createLogger } from '../../src/log.js';

/** Trees of `n` orgs, one leaf each, that count the trees a signer reads. */
function treesOf(n: number) {
  const trees = new Map<string, MemoryTree>(Array.from({ length: n }, (_, i) => [`org-${i}`, new MemoryTree()]));
  for (const [org, tree] of trees) tree.append(leafHash(Buffer.from(org)));
  const read = new Set<string>();
  const fake = {
    orgs: () => trees.keys(),
    catchingUp: () => false,
    size: (org: string) => trees.get(org)!.size,
    tree: (org: string) => (read.add(org), trees.get(org)!),
  };
  return { trees: fake as unknown as MerkleTrees, read };
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('LogCheckpoints.tick', () => {
  it('signs every grown org, 16 an event-loop turn, and skips a tick while one is signing', async () => {
    const key = generateKeyPairSync('ed25519').privateKey;
    const { trees, read } = treesOf(40);
    const checkpoints = new LogCheckpoints(trees, key, 'vigil.example', createLogger('silent'));
    checkpoints.tick();
    expect(read.size).toBe(16); // the first turn's share, no more
    checkpoints.tick(); // still signing: skipped, nothing signed twice or out of turn
    expect(read.size).toBe(16);
    await turn();
    expect(read.size).toBe(32);
    await turn();
    expect(read.size).toBe(40);
    // Each org's latest is the one the tick signed, valid under the org's origin.
    const signed = checkpoints.get('org-39')!;
    const opened = parseCheckpoint(openNote(signed.note, noteKey('vigil.example/vigil/org-39', rawPublicKey(key))) ?? '');
    expect(opened).toMatchObject({ origin: 'vigil.example/vigil/org-39', size: 1 });
    // A later tick signs nothing that did not grow.
    read.clear();
    checkpoints.tick();
    await turn();
    await turn();
    expect(read.size).toBe(0);
  });
});

describe('LogCheckpoints with a cluster checkpoint board', () => {
  /** The board's contract as the KV bucket keeps it (test/integration/kv-stores.test.ts runs the KV one). */
  class Board {
    private readonly held = new Map<string, PublishedCheckpoint>();
    private readonly listeners: ((org: string, checkpoint: PublishedCheckpoint) => void)[] = [];
    get(org: string): PublishedCheckpoint | undefined {
      return this.held.get(org);
    }
    offer(org: string, checkpoint: PublishedCheckpoint): void {
      if ((this.held.get(org)?.size ?? -1) < checkpoint.size) this.arrive(org, checkpoint);
    }
    watch(listener: (org: string, checkpoint: PublishedCheckpoint) => void): void {
      this.listeners.push(listener);
    }
    /** A checkpoint written to the board by any node (or anything else that can write it). */
    arrive(org: string, checkpoint: PublishedCheckpoint): void {
      this.held.set(org, checkpoint);
      for (const listener of this.listeners) listener(org, checkpoint);
    }
  }

  it('publishes what it signs, and serves a larger published checkpoint than its own (a node whose replica trails)', () => {
    const key = generateKeyPairSync('ed25519').privateKey;
    const board = new Board();
    // Node A has 3 leaves, node B (trailing) 2: the same log, the same key.
    const ahead = treesOf(1);
    const behind = treesOf(1);
    const aheadTree = (ahead.trees.tree('org-0') as unknown as MemoryTree);
    aheadTree.append(leafHash(Buffer.from('two')));
    aheadTree.append(leafHash(Buffer.from('three')));
    (behind.trees.tree('org-0') as unknown as MemoryTree).append(leafHash(Buffer.from('two')));
    const a = new LogCheckpoints(ahead.trees, key, 'vigil.example', createLogger('silent'), board);
    const b = new LogCheckpoints(behind.trees, key, 'vigil.example', createLogger('silent'), board);
    expect(b.get('org-0')!.size).toBe(2); // B signs its own, and publishes it
    expect(board.get('org-0')!.size).toBe(2);
    expect(a.get('org-0')!.size).toBe(3);
    expect(board.get('org-0')!.size).toBe(3);
    // B now serves A's, byte for byte, with its root; never again its own smaller one.
    const served = b.get('org-0')!;
    expect(served).toMatchObject({ size: 3, note: board.get('org-0')!.note });
    expect(served.root.equals(a.get('org-0')!.root)).toBe(true);
  });

  it('never serves a published note its own key did not sign for the org', () => {
    const key = generateKeyPairSync('ed25519').privateKey;
    const other = new LogCheckpoints(treesOf(1).trees, generateKeyPairSync('ed25519').privateKey, 'vigil.example', createLogger('silent'));
    const { trees } = treesOf(1);
    (trees.tree('org-0') as unknown as MemoryTree).append(leafHash(Buffer.from('two')));
    const board = new Board();
    const checkpoints = new LogCheckpoints(trees, key, 'vigil.example', createLogger('silent'), board);
    const own = checkpoints.get('org-0')!;
    // A larger note under another key, and one of another org's log under this key.
    const forged = other.signAt('org-0', 1);
    board.arrive('org-0', { size: 5, note: forged.note });
    expect(checkpoints.get('org-0')).toBe(own);
    // This key's genuine note of another org's log; its own note claimed larger; a text changed under its signatures.
    const otherOrg = new LogCheckpoints(treesOf(2).trees, key, 'vigil.example', createLogger('silent')).signAt('org-1', 1);
    board.arrive('org-0', { size: 1, note: otherOrg.note });
    expect(checkpoints.get('org-0')).toBe(own);
    board.arrive('org-0', { size: 9, note: own.note });
    expect(checkpoints.get('org-0')).toBe(own);
    board.arrive('org-0', { size: 9, note: own.note.replace('\n2\n', '\n9\n') });
    expect(checkpoints.get('org-0')).toBe(own);
  });

  it('judges a larger checkpoint as it reaches the board, not when a reader asks (one that reached it while the tree caught up: at the next tick)', () => {
    const key = generateKeyPairSync('ed25519').privateKey;
    const board = new Board();
    const lines: { msg: string; org: string; problem: string }[] = [];
    const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
    const mine = treesOf(1);
    let catchingUp = false;
    (mine.trees as unknown as { catchingUp: () => boolean }).catchingUp = () => catchingUp;
    const checkpoints = new LogCheckpoints(mine.trees, key, 'vigil.example', log, board);
    checkpoints.tick();
    // Another node's genuine larger checkpoint; this node's tree trails it.
    const ahead = treesOf(1);
    (ahead.trees.tree('org-0') as unknown as MemoryTree).append(leafHash(Buffer.from('two')));
    const theirs = new LogCheckpoints(ahead.trees, key, 'vigil.example', createLogger('silent')).signAt('org-0', 2);
    // A forged one (another key) is refused, and said so, with nobody asking.
    const forged = new LogCheckpoints(ahead.trees, generateKeyPairSync('ed25519').privateKey, 'vigil.example', createLogger('silent')).signAt('org-0', 2);
    board.arrive('org-0', { size: 2, note: forged.note });
    expect(lines).toEqual([expect.objectContaining({ org: 'org-0', problem: 'not signed by this log\'s key' })]);
    expect(checkpoints.get('org-0')!.size).toBe(1);
    expect(lines).toHaveLength(1); // judged once
    // While the tree catches up, nothing is judged; the next tick after it does.
    catchingUp = true;
    board.arrive('org-0', { size: 3, note: forged.note.replace('\n2\n', '\n3\n') });
    expect(lines).toHaveLength(1);
    catchingUp = false;
    checkpoints.tick();
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ problem: 'not signed by this log\'s key' });
    // The genuine one, with this node's tree now as large (no tick since): judged as it arrives,
    // its root read from the tree then, and served byte for byte with no tree read by the request.
    (mine.trees.tree('org-0') as unknown as MemoryTree).append(leafHash(Buffer.from('two')));
    mine.read.clear();
    board.arrive('org-0', { size: 2, note: theirs.note });
    expect(mine.read.has('org-0')).toBe(true);
    mine.read.clear();
    expect(checkpoints.get('org-0')).toMatchObject({ size: 2, note: theirs.note });
    expect(mine.read.size).toBe(0);
    expect(lines).toHaveLength(2);
  });

  it('judges a note it took while its tree trailed again once the tree reaches its size: a root not its own is refused then', () => {
    const key = generateKeyPairSync('ed25519').privateKey;
    const board = new Board();
    const lines: { problem: string }[] = [];
    const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
    const mine = treesOf(1);
    const checkpoints = new LogCheckpoints(mine.trees, key, 'vigil.example', log, board);
    checkpoints.tick();
    const diverged = treesOf(1);
    (diverged.trees.tree('org-0') as unknown as MemoryTree).append(leafHash(Buffer.from('elsewhere')));
    const theirs = new LogCheckpoints(diverged.trees, key, 'vigil.example', createLogger('silent')).signAt('org-0', 2);
    // Signed by the log's key, and this tree cannot say otherwise yet: served.
    board.arrive('org-0', { size: 2, note: theirs.note });
    expect(checkpoints.get('org-0')).toMatchObject({ size: 2, note: theirs.note });
    expect(lines).toEqual([]);
    // This node's tree reaches size 2 with another leaf: the tick signs its own and refuses the board's.
    (mine.trees.tree('org-0') as unknown as MemoryTree).append(leafHash(Buffer.from('two')));
    checkpoints.tick();
    expect(lines).toEqual([expect.objectContaining({ problem: 'a root this node\'s tree does not have at that size' })]);
    const served = checkpoints.get('org-0')!;
    expect(served.size).toBe(2);
    expect(served.note).not.toBe(theirs.note);
  });

  it('never serves a published root its own tree does not have at that size', () => {
    const key = generateKeyPairSync('ed25519').privateKey;
    const board = new Board();
    // Another tree of the same log (a replica that diverged), signed with the same key, one leaf larger.
    const diverged = treesOf(1);
    (diverged.trees.tree('org-0') as unknown as MemoryTree).append(leafHash(Buffer.from('elsewhere')));
    const theirs = new LogCheckpoints(diverged.trees, key, 'vigil.example', createLogger('silent')).signAt('org-0', 2);
    const mine = treesOf(1);
    (mine.trees.tree('org-0') as unknown as MemoryTree).append(leafHash(Buffer.from('two')));
    const checkpoints = new LogCheckpoints(mine.trees, key, 'vigil.example', createLogger('silent'), board);
    const own = checkpoints.get('org-0')!;
    expect(own.size).toBe(2);
    // Claimed larger than it is, it is refused by its size; at its own size it is not larger than ours: ours is served.
    board.arrive('org-0', { size: 3, note: theirs.note });
    expect(checkpoints.get('org-0')).toBe(own);
    (mine.trees.tree('org-0') as unknown as MemoryTree).append(leafHash(Buffer.from('three')));
    (diverged.trees.tree('org-0') as unknown as MemoryTree).append(leafHash(Buffer.from('more')));
    const theirs3 = new LogCheckpoints(diverged.trees, key, 'vigil.example', createLogger('silent')).signAt('org-0', 3);
    board.arrive('org-0', { size: 3, note: theirs3.note });
    // Ours is still of size 2 (no tick yet), the board's 3: the root at 3 is not ours, so ours is served.
    expect(checkpoints.get('org-0')).toBe(own);
  });
});

describe('LogCheckpoints against the checkpoint-v1 vector', () => {
  const vector = JSON.parse(readFileSync(new URL('../fixtures/checkpoint-v1.json', import.meta.url), 'utf8')) as {
    seed_hex: string;
    vkey: string;
    checkpoint: string;
    receipt: { origin: string; seq: number; leaf_hash: string; recorded_at: string; signature: string };
  };
  const merkle = JSON.parse(readFileSync(new URL('../fixtures/merkle-v1.json', import.meta.url), 'utf8')) as { trees: { name: string; leaf_inputs_hex: string[] }[] };

  it('signs the ledger-v1 tree at size 5 to the vector\'s note, its first signature byte for byte, and its receipt', () => {
    const tree = new MemoryTree();
    for (const input of merkle.trees.find((t) => t.name === 'ledger-v1')!.leaf_inputs_hex.slice(0, 5)) tree.append(leafHash(Buffer.from(input, 'hex')));
    const fake = { orgs: () => ['acme'][Symbol.iterator](), catchingUp: () => false, size: () => tree.size, tree: () => tree };
    const key = ed25519FromSeed(Buffer.from(vector.seed_hex, 'hex'));
    const checkpoints = new LogCheckpoints(fake as unknown as MerkleTrees, key, 'vigil.example', createLogger('silent'));
    const note = checkpoints.get('acme')!.note;
    // The server's note is the vector's with one more line: the same key under the origin prefix.
    expect(note.startsWith(vector.checkpoint)).toBe(true);
    const last = note.slice(vector.checkpoint.length).split('\n');
    expect(last).toEqual([expect.any(String), '']);
    expect(last[0]).toMatch(/^— vigil\.example\/vigil [A-Za-z0-9+/]+=*$/);
    expect(openNote(note, checkpoints.prefixKey)).toBe(openNote(vector.checkpoint, parseVerifierKey(vector.vkey)!));
    const { seq, leaf_hash, recorded_at, origin, signature } = vector.receipt;
    expect(checkpoints.receipt('acme', { seq, leaf_hash, recorded_at })).toEqual({ origin, seq, leaf_hash, recorded_at, signature });
  });
});
