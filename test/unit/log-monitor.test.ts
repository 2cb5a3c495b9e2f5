import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/cli/args.js';
import { parseMonitorArgs } from '../../src/cli/monitor.js';
import { judge, needsProof, openCheckpoint } from '../../src/domain/log-monitor.js';
import { consistencyProof, EMPTY_ROOT, leafHash, MemoryTree, rootAt } from '../../src/domain/merkle.js';
import { checkpointText, noteKey, rawPublicKey, signNote, verifierKey, type Checkpoint } from '../../src/domain/signed-note.js';
import { removeDir, tempDir } from '../support/server.js';

// DESIGN §10 monitor: what it decides about a checkpoint (pure), and the arguments it refuses.

const ORIGIN = 'vigil.example/vigil/acme';
const privateKey = generateKeyPairSync('ed25519').privateKey;
const published = noteKey('vigil.example/vigil', rawPublicKey(privateKey));

function treeOf(n: number, tag = ''): MemoryTree {
  const tree = new MemoryTree();
  for (let i = 0; i < n; i++) tree.append(leafHash(Buffer.from(`${tag}${i}`)));
  return tree;
}

const at = (tree: MemoryTree, size = tree.size): Checkpoint => ({ origin: ORIGIN, size, root: rootAt(tree, size) });

describe('openCheckpoint', () => {
  const note = signNote(checkpointText(at(treeOf(5))), published, privateKey);

  it('opens a checkpoint of the org signed by the key, named by the origin prefix or the origin', () => {
    expect(openCheckpoint(note, published, 'acme')).toEqual({ ok: true, checkpoint: at(treeOf(5)) });
    const byOrigin = noteKey(ORIGIN, rawPublicKey(privateKey));
    expect(openCheckpoint(signNote(checkpointText(at(treeOf(5))), byOrigin, privateKey), byOrigin, 'acme').ok).toBe(true);
  });

  it('refuses another key, another org, and signed text that is no checkpoint', () => {
    const other = noteKey('vigil.example/vigil', rawPublicKey(generateKeyPairSync('ed25519').privateKey));
    expect(openCheckpoint(note, other, 'acme')).toEqual({ ok: false, problem: 'signature', claimed: at(treeOf(5)) });
    expect(openCheckpoint(note, published, 'other')).toEqual({ ok: false, problem: 'origin', origin: ORIGIN, expected: 'vigil.example/vigil/other' });
    expect(openCheckpoint(signNote('hello\n', published, privateKey), published, 'acme')).toEqual({ ok: false, problem: 'malformed' });
    expect(openCheckpoint('not a note', published, 'acme')).toEqual({ ok: false, problem: 'signature', claimed: null });
  });
});

describe('judge', () => {
  const tree = treeOf(20);
  const forked = treeOf(20, 'x');

  it('takes the same checkpoint as unchanged, and a larger one with a proof that it extends the one seen', () => {
    expect(judge(at(tree, 7), at(tree, 7), null)).toEqual({ type: 'unchanged' });
    for (const from of [1, 4, 7, 16]) {
      expect(needsProof(at(tree, from), at(tree))).toBe(true);
      expect(judge(at(tree, from), at(tree), consistencyProof(tree, from, 20)), `from ${from}`).toEqual({ type: 'consistent' });
    }
    expect(needsProof({ origin: ORIGIN, size: 0, root: EMPTY_ROOT }, at(tree))).toBe(false);
    expect(judge({ origin: ORIGIN, size: 0, root: EMPTY_ROOT }, at(tree), null)).toEqual({ type: 'consistent' });
  });

  it('calls a fork: a smaller size, two roots for one size, a proof that fails or is missing', () => {
    expect(judge(at(tree, 8), at(tree, 7), null)).toEqual({ type: 'fork', problem: 'shrunk' });
    expect(judge(at(tree, 7), at(forked, 7), null)).toEqual({ type: 'fork', problem: 'two-roots' });
    expect(judge(at(tree, 7), at(forked), consistencyProof(forked, 7, 20))).toEqual({ type: 'fork', problem: 'proof-fails' });
    expect(judge(at(tree, 7), at(tree), consistencyProof(tree, 6, 20))).toEqual({ type: 'fork', problem: 'proof-fails' });
    expect(judge(at(tree, 7), at(tree), null)).toEqual({ type: 'fork', problem: 'proof-fails' });
  });

  it('compares nothing across logs', () => {
    const elsewhere = { ...at(tree), origin: 'vigil.example/vigil/other' };
    expect(needsProof(at(tree, 7), elsewhere)).toBe(false);
    expect(judge(at(tree, 7), elsewhere, null)).toEqual({ type: 'other-log' });
  });
});

describe('parseMonitorArgs', () => {
  const vkey = verifierKey(published);

  it('reads the base URL, org, key (or @file), state and follow options', async () => {
    const dir = tempDir();
    try {
      writeFileSync(join(dir, 'vkey'), `${vkey}\n`);
      const once = await parseMonitorArgs(['https://vigil.example/', 'acme', '--key', `@${join(dir, 'vkey')}`, '--state', 's.json']);
      expect(once).toMatchObject({ log: { base: 'https://vigil.example', org: 'acme' }, key: published, statePath: 's.json', follow: false, intervalSeconds: 10, withheldPolls: 6 });
      expect(await parseMonitorArgs(['http://h:1', 'acme', '--key', vkey, '--state', 's', '--follow', '--withheld', '2'])).toMatchObject({ follow: true, withheldPolls: 2 });
      expect(await parseMonitorArgs(['http://h:1/x', 'acme', '--key', vkey, '--state', 's', '--follow', '--interval', '0.5'])).toMatchObject({ log: { base: 'http://h:1/x' }, follow: true, intervalSeconds: 0.5 });
      expect(await parseMonitorArgs(['--help'])).toBe('help');
    } finally {
      removeDir(dir);
    }
  });

  it('refuses every bad argument with a UsageError naming it', async () => {
    const good = ['https://vigil.example', 'acme', '--key', vkey, '--state', 's'];
    const cases: [string[], RegExp][] = [
      [[], /^monitor needs a base URL and an org$/],
      [['https://vigil.example'], /^monitor needs a base URL and an org$/],
      [['https://vigil.example', 'acme', '--state', 's'], /^monitor needs --key and --state$/],
      [['https://vigil.example', 'acme', '--key', vkey], /^monitor needs --key and --state$/],
      [[...good, 'extra'], /^unexpected argument extra$/],
      [[...good, '--bogus'], /^Unknown option '--bogus'/],
      [['vigil.example', ...good.slice(1)], /^<base url>: vigil\.example is not a URL/],
      [['ftp://vigil.example', ...good.slice(1)], /^<base url>: .* is not an http or https URL$/],
      [['https://vigil.example/?x=1', ...good.slice(1)], /^<base url>: .* has a query or fragment/],
      [['https://vigil.example', 'Acme!', ...good.slice(2)], /^<org>: org slug is/],
      [['https://vigil.example', 'acme', '--key', 'nope', '--state', 's'], /^--key: not a verifier key /],
      [['https://vigil.example', 'acme', '--key', vkey.replace(/\+[0-9a-f]{8}\+/, '+00000000+'), '--state', 's'], /^--key: not a verifier key /],
      [['https://vigil.example', 'acme', '--key', '@/nonexistent/vkey', '--state', 's'], /^--key: cannot read \/nonexistent\/vkey \(ENOENT\)$/],
      [[...good, '--interval', '5'], /^--interval applies to --follow$/],
      [[...good, '--follow', '--interval', '0'], /^--interval: 0 is not a number of seconds/],
      [[...good, '--follow', '--interval', 'soon'], /^--interval: soon is not a number of seconds/],
      [[...good, '--withheld', '3'], /^--withheld applies to --follow$/],
      [[...good, '--follow', '--withheld', '0'], /^--withheld: 0 is not a whole number of polls/],
      [[...good, '--follow', '--withheld', '1.5'], /^--withheld: 1\.5 is not a whole number of polls/],
    ];
    for (const [args, message] of cases) {
      const refused = await parseMonitorArgs(args).then(
        () => null,
        (error: unknown) => error,
      );
      expect(refused, args.join(' ')).toBeInstanceOf(UsageError);
      expect((refused as UsageError).message, args.join(' ')).toMatch(message);
    }
  });
});
