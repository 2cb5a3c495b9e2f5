import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { LogCheckpoints } from '../../src/actors/log-checkpoints.js';
import type { MerkleTrees } from '../../src/actors/merkle-trees.js';
import { leafHash, MemoryTree } from '../../src/domain/merkle.js';
import { noteKey, openNote, parseCheckpoint, rawPublicKey } from '../../src/domain/signed-note.js';
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
