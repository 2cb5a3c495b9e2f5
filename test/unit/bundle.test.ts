import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { readTarGz, writeTarGz } from '../../src/bundle/tar.js';
import { BUNDLE_DATA_FILES, buildBundle, parseManifest, parseManifestSha256Line, type BundleInput } from '../../src/domain/bundle.js';
import { removeDir, tempDir } from '../support/server.js';

const hex = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');
const ZERO = '0'.repeat(64);

function input(overrides: Partial<BundleInput> = {}): BundleInput {
  return {
    org: 'acme',
    since_seq: 10,
    until_seq: 40,
    start_hash: 'a'.repeat(64),
    end_hash: 'b'.repeat(64),
    policy_digests: ['sha256:ff', 'sha256:01', 'sha256:ff'],
    agents: null,
    created_at: '2025-01-02T03:04:05.000Z',
    // Out of order on purpose: the bundle puts them in BUNDLE_DATA_FILES order.
    data: [
      { name: 'oversight.jsonl', content: Buffer.from('{"o":1}\n') },
      { name: 'ledger.jsonl', content: Buffer.from('{"seq":11}\n') },
      { name: 'cards.json', content: Buffer.from('[]\n') },
      { name: 'incidents.jsonl', content: Buffer.alloc(0) },
    ],
    ...overrides,
  };
}

/** A raw ustar header for the reader's refusals, built by hand so the writer's checks do not apply. */
function rawTarGz(name: string, content: Buffer, type = '0'): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 'utf8');
  h.write('0000644\0', 100);
  h.write('0000000\0', 108);
  h.write('0000000\0', 116);
  h.write(`${content.length.toString(8).padStart(11, '0')}\0`, 124);
  h.write('00000000000\0', 136);
  h.write(type, 156);
  h.write('ustar\0', 257);
  h.write('00', 263);
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  const pad = Buffer.alloc((512 - (content.length % 512)) % 512);
  return gzipSync(Buffer.concat([h, content, pad, Buffer.alloc(1024)]));
}

describe('buildBundle', () => {
  it('builds the manifest fields in the documented order, with records and normalized digests', () => {
    const built = buildBundle(input({ agents: ['bot-1', 'bot-2'] }));
    expect(Object.keys(built.manifest)).toEqual([
      'format', 'org', 'since_seq', 'until_seq', 'records', 'start_hash', 'end_hash', 'policy_digests', 'agents', 'files', 'created_at',
    ]);
    expect(built.manifest).toMatchObject({
      format: 'vigil-bundle/1',
      org: 'acme',
      since_seq: 10,
      until_seq: 40,
      records: 30,
      policy_digests: ['sha256:01', 'sha256:ff'],
      agents: ['bot-1', 'bot-2'],
      created_at: '2025-01-02T03:04:05.000Z',
    });
    expect(buildBundle(input()).manifest.agents).toBeNull();
  });

  it('lists every data file in order with its byte size and sha256', () => {
    const built = buildBundle(input());
    expect(built.manifest.files.map((f) => f.name)).toEqual([...BUNDLE_DATA_FILES]);
    for (const f of built.manifest.files) {
      const content = input().data.find((d) => d.name === f.name)!.content;
      expect(f).toEqual({ name: f.name, bytes: content.length, sha256: hex(content) });
    }
    expect(built.manifest.files.find((f) => f.name === 'incidents.jsonl')!.sha256).toBe(hex(''));
  });

  it('returns the data files, manifest.json (2-space JSON + newline) and a sha256sum line for it', () => {
    const built = buildBundle(input());
    expect(built.files.map((f) => f.name)).toEqual([...BUNDLE_DATA_FILES, 'manifest.json', 'manifest.sha256']);
    expect(built.manifestText).toBe(`${JSON.stringify(built.manifest, null, 2)}\n`);
    expect(built.files[4]!.content.toString()).toBe(built.manifestText);
    expect(built.manifestSha256).toBe(hex(built.manifestText));
    expect(built.files[5]!.content.toString()).toBe(`${built.manifestSha256}  manifest.json\n`);
    expect(parseManifestSha256Line(built.files[5]!.content.toString())).toBe(built.manifestSha256);
  });

  it('is a function of its input', () => {
    expect(buildBundle(input()).manifestText).toBe(buildBundle(input()).manifestText);
  });

  it('throws on a caller bug: missing, unknown or doubled data file, bad window or hash', () => {
    const data = input().data;
    expect(() => buildBundle(input({ data: data.slice(1) }))).toThrow(/missing: oversight\.jsonl/);
    expect(() => buildBundle(input({ data: [...data, { name: 'x.txt', content: Buffer.alloc(0) }] }))).toThrow(/x\.txt/);
    expect(() => buildBundle(input({ data: [...data, data[0]!] }))).toThrow(/twice/);
    expect(() => buildBundle(input({ since_seq: 5, until_seq: 4 }))).toThrow(/window/);
    expect(() => buildBundle(input({ start_hash: 'xyz' }))).toThrow(/start_hash/);
  });

  it('parses back what it builds, and names broken rules between fields', () => {
    const built = buildBundle(input());
    expect(parseManifest(built.manifestText)).toEqual({ manifest: built.manifest, problems: [] });
    const bad = { ...built.manifest, since_seq: 0, records: 3, policy_digests: ['b', 'a'], files: built.manifest.files.slice(1) };
    const parsed = parseManifest(JSON.stringify(bad));
    expect(parsed.problems).toEqual([
      'records is 3, the window 0..40 holds 40',
      'start_hash must be 64 zeros when since_seq is 0',
      'policy_digests are not sorted and unique',
      'files does not list ledger.jsonl',
    ]);
    expect(parseManifest('{').manifest).toBeNull();
    expect(parseManifest(JSON.stringify({ ...built.manifest, format: 'vigil-bundle/2' })).problems[0]).toMatch(/^format:/);
    const genesis = buildBundle(input({ since_seq: 0, start_hash: ZERO }));
    expect(parseManifest(genesis.manifestText).problems).toEqual([]);
  });
});

describe('tar', () => {
  const binary = Buffer.from(Array.from({ length: 2000 }, (_, i) => (i * 37) % 256));
  const files = [
    { name: 'ledger.jsonl', content: Buffer.from('{"seq":1}\n') },
    { name: 'with spaces in name.bin', content: binary },
    { name: 'empty', content: Buffer.alloc(0) },
    { name: 'exactly-one-block', content: Buffer.alloc(512, 0x41) },
    { name: 'sub/dir/file.txt', content: Buffer.from('nested') },
  ];

  it('round-trips names and content, binary included', () => {
    const back = readTarGz(writeTarGz(files, 1_700_000_000));
    expect(back.map((f) => f.name)).toEqual(files.map((f) => f.name));
    back.forEach((f, i) => expect(f.content.equals(files[i]!.content)).toBe(true));
  });

  it('writes ustar headers: mode 0644, uid/gid 0, mtime, a valid checksum and two zero blocks at the end', () => {
    const tar = gunzipSync(writeTarGz([files[0]!], 1_700_000_000));
    expect(tar.length).toBe(512 * 4);
    const h = tar.subarray(0, 512);
    expect(h.toString('latin1', 100, 107)).toBe('0000644');
    expect(h.toString('latin1', 108, 115)).toBe('0000000');
    expect(h.toString('latin1', 116, 123)).toBe('0000000');
    expect(parseInt(h.toString('latin1', 136, 147), 8)).toBe(1_700_000_000);
    expect(h.toString('latin1', 257, 263)).toBe('ustar\0');
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!;
    expect(parseInt(h.toString('latin1', 148, 154), 8)).toBe(sum);
    expect(tar.subarray(1024).every((b) => b === 0)).toBe(true);
  });

  it('is deterministic', () => {
    expect(writeTarGz(files, 1).equals(writeTarGz(files, 1))).toBe(true);
  });

  it('refuses names over 100 bytes, absolute names and .. segments when writing', () => {
    const c = Buffer.alloc(1);
    expect(() => writeTarGz([{ name: 'x'.repeat(100), content: c }], 0)).not.toThrow();
    expect(() => writeTarGz([{ name: 'x'.repeat(101), content: c }], 0)).toThrow(/100/);
    expect(() => writeTarGz([{ name: '/etc/passwd', content: c }], 0)).toThrow(/absolute/);
    expect(() => writeTarGz([{ name: 'a/../../x', content: c }], 0)).toThrow(/\.\./);
  });

  it('reader refuses ../x, absolute names, links, duplicates, bad checksums, truncation and the size cap', () => {
    expect(readTarGz(rawTarGz('ok.txt', Buffer.from('hi')))[0]!.content.toString()).toBe('hi');
    expect(() => readTarGz(rawTarGz('../x', Buffer.from('evil')))).toThrow(/\.\. segment/);
    expect(() => readTarGz(rawTarGz('a/../../x', Buffer.from('evil')))).toThrow(/\.\. segment/);
    expect(() => readTarGz(rawTarGz('/etc/cron.d/x', Buffer.from('evil')))).toThrow(/absolute/);
    expect(() => readTarGz(rawTarGz('link', Buffer.alloc(0), '2'))).toThrow(/not a regular file/);
    const twice = gzipSync(Buffer.concat([gunzipSync(writeTarGz([files[0]!], 0)).subarray(0, 1024), gunzipSync(writeTarGz([files[0]!], 0))]));
    expect(() => readTarGz(twice)).toThrow(/twice/);
    const tar = gunzipSync(writeTarGz([files[0]!], 0));
    tar[0] = 0x4d; // 'M': the name changes, the stored checksum does not
    expect(() => readTarGz(gzipSync(tar))).toThrow(/checksum/);
    const cut = gunzipSync(writeTarGz([{ name: 'big', content: Buffer.alloc(5000) }], 0)).subarray(0, 2048);
    expect(() => readTarGz(gzipSync(cut))).toThrow(/truncated/);
    const big = writeTarGz([{ name: 'a', content: Buffer.alloc(600) }, { name: 'b', content: Buffer.alloc(600) }], 0);
    expect(() => readTarGz(big, { maxBytes: 1000 })).toThrow(/cap at b/);
    expect(readTarGz(big, { maxBytes: 1200 }).length).toBe(2);
    expect(() => readTarGz(Buffer.from('not gzip'))).toThrow(/not a gzip archive/);
  });

  it('is read by GNU tar, and reads what GNU tar writes', () => {
    const dir = tempDir();
    try {
      const archive = join(dir, 'b.tar.gz');
      writeFileSync(archive, writeTarGz(files, 1_700_000_000));
      const listed = execFileSync('tar', ['-tzf', archive], { encoding: 'utf8' });
      expect(listed.split('\n').filter((l) => l !== '')).toEqual(files.map((f) => f.name));
      const verbose = execFileSync('tar', ['-tvzf', archive], { encoding: 'utf8', env: { TZ: 'UTC', PATH: process.env.PATH ?? '' } });
      expect(verbose).toContain('-rw-r--r-- 0/0');
      const extracted = join(dir, 'x');
      mkdirSync(extracted);
      execFileSync('tar', ['-xzf', archive, '-C', extracted]);
      const again = join(dir, 'gnu.tgz');
      execFileSync('tar', ['-czf', again, '-C', extracted, 'with spaces in name.bin', 'sub']);
      const read = readTarGz(readFileSync(again));
      expect(read.map((f) => f.name)).toEqual(['with spaces in name.bin', 'sub/dir/file.txt']);
      expect(read[0]!.content.equals(binary)).toBe(true);
    } finally {
      removeDir(dir);
    }
  });
});
