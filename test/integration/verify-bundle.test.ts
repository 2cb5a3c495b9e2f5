import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeTarGz } from '../../src/bundle/tar.js';
import { verifyBundle } from '../../src/cli/verify-bundle.js';
import { buildBundle, type BuiltBundle, type BundleFile } from '../../src/domain/bundle.js';
import { merkleFileText } from '../../src/domain/bundle-log.js';
import { GENESIS_HASH, exportLine, makeRow, rowLeafHash, type LedgerRow } from '../../src/domain/ledger.js';
import { compactRange, MemoryTree, rootAt } from '../../src/domain/merkle.js';
import { checkpointText, noteKey, rawPublicKey, signNote, verifierKey } from '../../src/domain/signed-note.js';
import { removeDir, runCli, tempDir } from '../support/server.js';

const SINCE = 10;
const UNTIL = 40;
const MTIME = 1_700_000_000;

let dir: string;
let rows: LedgerRow[];
let bundle: BuiltBundle;
let bundleDir: string;
let bundleTgz: string;

function makeChain(n: number): LedgerRow[] {
  const out: LedgerRow[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const agent = seq % 4 === 0 ? null : `bot-${seq % 3}`;
    const row = makeRow(prev, seq, 'event', new Date(Date.UTC(2025, 0, 1, 0, 0, seq)).toISOString(), agent, { i: seq, note: `ünïcode ${seq}` });
    out.push(row);
    prev = row.chainHash;
  }
  return out;
}

/** The log's key in these tests, and its verifier key (named by the origin prefix, as GET /public/log-key serves it). */
const LOG_KEY = generateKeyPairSync('ed25519').privateKey;
const VKEY = noteKey('vigil.example/vigil', rawPublicKey(LOG_KEY));

/** checkpoint.txt and merkle.json as the service makes them: the honest rows' tree, signed at `until`. */
function logFiles(since: number, until: number, key: KeyObject = LOG_KEY): BundleFile[] {
  const tree = new MemoryTree();
  for (const row of rows.slice(0, until)) tree.append(rowLeafHash(row));
  const text = checkpointText({ origin: 'vigil.example/vigil/acme', size: until, root: rootAt(tree, until) });
  const range = compactRange(tree, since).map(({ level, index, hash }) => ({ level, index, hash: hash.toString('hex') }));
  return [
    { name: 'checkpoint.txt', content: Buffer.from(signNote(text, noteKey('vigil.example/vigil', rawPublicKey(key)), key)) },
    { name: 'merkle.json', content: Buffer.from(merkleFileText({ since_seq: since, tree_size: until, range })) },
  ];
}

/**
 * A bundle over rows since..until whose ledger.jsonl holds `lines` (the honest lines by default),
 * with the log files of the honest rows unless `log` is null (a bundle from before the log).
 */
function build(lines: string[], since = SINCE, until = UNTIL, log: BundleFile[] | null = logFiles(since, until)): BuiltBundle {
  return buildBundle({
    org: 'acme',
    since_seq: since,
    until_seq: until,
    start_hash: since === 0 ? '0'.repeat(64) : rows[since - 1]!.chainHash.toString('hex'),
    end_hash: rows[until - 1]!.chainHash.toString('hex'),
    policy_digests: ['sha256:' + 'c'.repeat(64)],
    agents: null,
    created_at: '2025-02-01T00:00:00.000Z',
    data: [
      { name: 'ledger.jsonl', content: Buffer.from(lines.map((l) => `${l}\n`).join('')) },
      { name: 'cards.json', content: Buffer.from(`${JSON.stringify([{ agent_id: 'bot-1', score: 0.25 }], null, 2)}\n`) },
      { name: 'incidents.jsonl', content: Buffer.from('{"id":"inc_1","agent_id":"bot-2","severity":"high"}\n') },
      { name: 'oversight.jsonl', content: Buffer.from('{"review":"rv_1","decision":"approve"}\n') },
      ...(log ?? []),
    ],
  });
}

function windowLines(since = SINCE, until = UNTIL): string[] {
  return rows.slice(since, until).map(exportLine);
}

let counter = 0;
/** Writes the files both as a directory and as a .tar.gz; returns both paths. */
function write(files: BundleFile[]): { dir: string; tgz: string } {
  const base = join(dir, `b${counter++}`);
  mkdirSync(base);
  for (const f of files) writeFileSync(join(base, f.name), f.content);
  const tgz = `${base}.tar.gz`;
  writeFileSync(tgz, writeTarGz(files, MTIME));
  return { dir: base, tgz };
}

/** The bundle's files with one byte of `name` changed. */
function withOneByteChanged(files: BundleFile[], name: string): BundleFile[] {
  return files.map((f) => {
    if (f.name !== name) return f;
    const content = Buffer.from(f.content);
    if (name === 'manifest.sha256') content[0] = content[0] === 0x30 ? 0x31 : 0x30; // still hex: a real mismatch
    else content[content.length >> 1]! ^= 0x01;
    return { name, content };
  });
}

/** The problems printed after the verdict; each is one line that starts with the file it names. */
function problemLines(stdout: string): string[] {
  const lines = stdout.trim().split('\n');
  expect(lines[0]).toBe('bundle INVALID:');
  const problems = lines.slice(1).map((l) => l.trim());
  for (const p of problems) expect(p).toMatch(/^(ledger\.jsonl|cards\.json|incidents\.jsonl|oversight\.jsonl|checkpoint\.txt|merkle\.json|manifest\.json|manifest\.sha256)[: ]/);
  return problems;
}

beforeAll(() => {
  dir = tempDir('vigil-bundle-');
  rows = makeChain(UNTIL);
  bundle = build(windowLines());
  ({ dir: bundleDir, tgz: bundleTgz } = write(bundle.files));
});
afterAll(() => removeDir(dir));

describe('vigil verify <bundle>', () => {
  it('accepts the bundle as a directory and as .tar.gz, with or without the expected manifest sha256', async () => {
    const okLine = `bundle OK: org acme, records 11..40 (30), manifest sha256 ${bundle.manifestSha256}`;
    const results = await Promise.all([
      runCli(['verify', bundleDir], {}),
      runCli(['verify', bundleTgz], {}),
      runCli(['verify', bundleTgz, '--manifest-sha256', bundle.manifestSha256], {}),
    ]);
    for (const r of results) {
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout.trim().split('\n')[0]).toBe(okLine);
      expect(r.stdout).toContain('log vigil.example/vigil/acme: the window makes the checkpoint\'s root');
      expect(r.stdout).toContain('signature NOT checked');
    }
  });

  it('--key: the checkpoint must be signed by the log key (given as the key or @file); another key, or no checkpoint, is refused', async () => {
    const vkeyFile = join(dir, 'log.vkey');
    writeFileSync(vkeyFile, `${verifierKey(VKEY)}\n`);
    const other = verifierKey(noteKey('vigil.example/vigil', rawPublicKey(generateKeyPairSync('ed25519').privateKey)));
    const legacy = write(build(windowLines(), SINCE, UNTIL, null).files).tgz;
    const [byKey, byFile, wrong, old, oldNoKey] = await Promise.all([
      runCli(['verify', bundleTgz, '--key', verifierKey(VKEY)], {}),
      runCli(['verify', bundleDir, '--key', `@${vkeyFile}`], {}),
      runCli(['verify', bundleTgz, '--key', other], {}),
      runCli(['verify', legacy, '--key', verifierKey(VKEY)], {}),
      runCli(['verify', legacy], {}),
    ]);
    for (const r of [byKey, byFile]) {
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toContain(`at size ${UNTIL}, signed by the key given`);
    }
    expect(wrong.code).toBe(1);
    expect(problemLines(wrong.stdout)).toEqual([`checkpoint.txt: not signed by the key ${other.split('+').slice(0, 2).join('+')}`]);
    expect(old.code).toBe(1);
    expect(problemLines(old.stdout)).toEqual(['checkpoint.txt: missing, so nothing is signed by the key given (a bundle from before the transparency log?)']);
    expect(oldNoKey.code).toBe(0);
    expect(oldNoKey.stdout).toContain('no log checkpoint');
    const bad = await runCli(['verify', bundleTgz, '--key', 'not-a-key'], {});
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--key: not a verifier key');
  });

  it('catches a window rewritten and re-chained under a recomputed manifest: its records no longer make the signed root', async () => {
    // An insider edits seq 25 and re-chains every later row: the chain and the manifest hold, only the log tells.
    const forged: LedgerRow[] = rows.slice(0, SINCE);
    for (const row of rows.slice(SINCE, UNTIL)) {
      const body = row.seq === 25 ? { i: 25, note: 'nothing happened' } : row.body;
      forged.push(makeRow(forged[forged.length - 1]!.chainHash, row.seq, row.kind, row.recordedAt, row.agentId, body));
    }
    const files = buildBundle({ ...bundle.manifest, end_hash: forged[UNTIL - 1]!.chainHash.toString('hex'), data: [
      { name: 'ledger.jsonl', content: Buffer.from(forged.slice(SINCE).map((r) => `${exportLine(r)}\n`).join('')) },
      ...bundle.files.slice(1, 6),
    ] }).files;
    const r = await runCli(['verify', write(files).tgz, '--key', verifierKey(VKEY)], {});
    expect(r.code).toBe(1);
    const problems = problemLines(r.stdout);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^checkpoint\.txt: signs root \S+ for size 40; merkle\.json's range with the window's records makes \S+$/);
    // A range hash changed (the manifest recomputed) or a checkpoint of another size: named too.
    const range = JSON.parse(bundle.files[5]!.content.toString());
    range.range[0].hash = 'ab'.repeat(32);
    const badRange = buildBundle({ ...bundle.manifest, data: [...bundle.files.slice(0, 5), { name: 'merkle.json', content: Buffer.from(JSON.stringify(range)) }] });
    expect((await verifyBundle(write(badRange.files).dir, { key: VKEY })).problems[0]).toMatch(/^checkpoint\.txt: signs root/);
    const shorter = buildBundle({ ...bundle.manifest, data: [...bundle.files.slice(0, 4), logFiles(SINCE, UNTIL - 1)[0]!, bundle.files[5]!] });
    expect((await verifyBundle(write(shorter.files).dir, { key: VKEY })).problems).toContain(`checkpoint.txt: size ${UNTIL - 1}, the window ends at seq ${UNTIL}`);
  });

  it('names each file of the bundle with one byte changed, in both forms', async () => {
    const names = bundle.files.map((f) => f.name);
    expect(names).toEqual(['ledger.jsonl', 'cards.json', 'incidents.jsonl', 'oversight.jsonl', 'checkpoint.txt', 'merkle.json', 'manifest.json', 'manifest.sha256']);
    const cases = names.flatMap((name) => {
      const paths = write(withOneByteChanged(bundle.files, name));
      return [paths.dir, paths.tgz].map((path) => ({ name, path }));
    });
    const results = await Promise.all(cases.map((c) => runCli(['verify', c.path], {})));
    results.forEach((r, i) => {
      const { name, path } = cases[i]!;
      expect(r.code, `${name} in ${path}`).toBe(1);
      const problems = problemLines(r.stdout);
      expect(problems.some((p) => p.includes(name)), `${name}: ${r.stdout}`).toBe(true);
      // Data files are named as the file at fault; the manifest pair is one mismatch naming both.
      if (name.endsWith('.jsonl') || name === 'cards.json') expect(problems.some((p) => p.startsWith(`${name}: sha256 `))).toBe(true);
    });
  });

  it('names the first bad seq when the ledger lines are swapped, removed or edited, even under a recomputed manifest', async () => {
    const swapped = windowLines();
    [swapped[4], swapped[5]] = [swapped[5]!, swapped[4]!]; // seqs 15 and 16
    const removed = windowLines().filter((l) => !l.startsWith('{"seq":20,'));
    const edited = windowLines().map((l) => (l.startsWith('{"seq":25,') ? l.replace('"i":25', '"i":26') : l));
    const [s, r, e] = await Promise.all([swapped, removed, edited].map((lines) => runCli(['verify', write(build(lines).files).tgz], {})));
    expect(s!.code).toBe(1);
    expect(problemLines(s!.stdout)).toEqual(['ledger.jsonl: chain broken at seq 16: expected seq 15, found 16']);
    expect(r!.code).toBe(1);
    expect(problemLines(r!.stdout)).toEqual([
      'ledger.jsonl: 29 records, the manifest says 30 (seqs 11..40)',
      'ledger.jsonl: chain broken at seq 21: expected seq 20, found 21',
    ]);
    expect(e!.code).toBe(1);
    expect(problemLines(e!.stdout)).toEqual(['ledger.jsonl: chain broken at seq 25: content_hash does not match the record']);
  });

  it('fails when the manifest sha256 is not the expected one', async () => {
    const other = 'f'.repeat(64);
    const r = await runCli(['verify', bundleDir, '--manifest-sha256', other], {});
    expect(r.code).toBe(1);
    expect(problemLines(r.stdout)).toEqual([`manifest.json: sha256 ${bundle.manifestSha256} is not the expected ${other}`]);
    const report = await verifyBundle(bundleTgz, { expectedManifestSha256: other });
    expect(report).toMatchObject({ ok: false, manifestSha256: bundle.manifestSha256, org: 'acme', window: { since_seq: SINCE, until_seq: UNTIL } });
  });

  it('refuses a malformed --manifest-sha256 and keeps verifying plain ledger files', async () => {
    const bad = await runCli(['verify', bundleDir, '--manifest-sha256', 'abc'], {});
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--manifest-sha256');
    const ledger = join(dir, 'full.jsonl');
    writeFileSync(ledger, rows.map((row) => `${exportLine(row)}\n`).join(''));
    const plain = await runCli(['verify', ledger], {});
    expect(plain.code).toBe(0);
    expect(plain.stdout).toContain(`OK: 40 records, chain intact, head ${rows[39]!.chainHash.toString('hex')}`);
  });
});

describe('verifyBundle', () => {
  it('reports a verified window: records, org, window and the manifest sha256', async () => {
    expect(await verifyBundle(bundleDir)).toEqual({
      ok: true,
      problems: [],
      manifestSha256: bundle.manifestSha256,
      records: 30,
      org: 'acme',
      window: { since_seq: SINCE, until_seq: UNTIL },
      log: { origin: 'vigil.example/vigil/acme', size: UNTIL, root: expect.any(String), signed: false },
    });
    expect(await verifyBundle(bundleDir, { key: VKEY })).toMatchObject({ ok: true, log: { signed: true } });
    const genesis = write(build(windowLines(0, 40), 0, 40).files);
    expect(await verifyBundle(genesis.tgz)).toMatchObject({ ok: true, records: 40 });
  });

  it('names missing and unlisted files', async () => {
    const paths = write(bundle.files);
    rmSync(join(paths.dir, 'cards.json'));
    rmSync(join(paths.dir, 'manifest.sha256'));
    writeFileSync(join(paths.dir, 'notes.txt'), 'hello');
    expect((await verifyBundle(paths.dir)).problems).toEqual(['manifest.sha256: missing', 'notes.txt: not listed in the manifest', 'cards.json: missing']);
    const noManifest = write(bundle.files.filter((f) => f.name !== 'manifest.json'));
    expect((await verifyBundle(noManifest.tgz)).problems).toEqual(['manifest.json: missing']);
  });

  it('keeps each problem on one line when manifest.json is not JSON', async () => {
    const files = bundle.files.map((f) => (f.name === 'manifest.json' ? { name: f.name, content: Buffer.from(f.content.toString().replace('"org": ', '"org": !')) } : f));
    const r = await runCli(['verify', write(files).dir], {});
    expect(r.code).toBe(1);
    const problems = problemLines(r.stdout);
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(/^manifest\.json does not match manifest\.sha256: /);
    expect(problems[1]).toMatch(/^manifest\.json: not JSON \(/);
  });

  it('checks the chain against end_hash when the last record is dropped', async () => {
    const short = build(windowLines(SINCE, UNTIL - 1));
    const lying = buildBundle({ ...short.manifest, end_hash: bundle.manifest.end_hash, until_seq: UNTIL, data: short.files.slice(0, 4) });
    const report = await verifyBundle(write(lying.files).dir);
    expect(report.problems).toEqual([
      'ledger.jsonl: 29 records, the manifest says 30 (seqs 11..40)',
      `ledger.jsonl: chain ends at ${rows[38]!.chainHash.toString('hex')}, the manifest's end_hash is ${bundle.manifest.end_hash}`,
    ]);
  });

  it('reads an archive GNU tar made of the bundle directory, and names unreadable archives', async () => {
    const gnu = join(dir, 'gnu.tgz');
    execFileSync('tar', ['-czf', gnu, '-C', dir, basename(bundleDir)]);
    expect(await verifyBundle(gnu)).toMatchObject({ ok: true, records: 30 });
    const missing = await verifyBundle(join(dir, 'nope.tar.gz'));
    expect(missing.ok).toBe(false);
    expect(missing.problems[0]).toMatch(/nope\.tar\.gz: .*ENOENT/);
    const garbage = join(dir, 'garbage.tgz');
    writeFileSync(garbage, 'not an archive');
    expect((await verifyBundle(garbage)).problems).toEqual([`${garbage}: tar: not a gzip archive (incorrect header check)`]);
  });
});
