import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readTarGz } from '../bundle/tar.js';
import { BUNDLE_DATA_FILES, MANIFEST_FILE, MANIFEST_SHA256_FILE, parseManifest, parseManifestSha256Line, sha256Hex, type Manifest } from '../domain/bundle.js';
import { ChainVerifier, rowFromExport, type ExportedRecord } from '../domain/ledger.js';

export interface BundleReport {
  ok: boolean;
  /** Each problem names its file (and, for the chain, the first bad seq). */
  problems: string[];
  /** The sha256 of manifest.json's bytes as found, or null when there is none. */
  manifestSha256: string | null;
  /** Lines of ledger.jsonl read (equals the manifest's records when ok). */
  records: number;
  org: string | null;
  window: { since_seq: number; until_seq: number } | null;
}

/** A bundle's files by name, whether it is a directory or an archive. */
interface BundleSource {
  names: string[];
  read(name: string): Promise<Buffer | null>;
}

export function isBundleArchive(path: string): boolean {
  return path.endsWith('.tar.gz') || path.endsWith('.tgz');
}

/**
 * Verifies a bundle directory or .tar.gz/.tgz: manifest.sha256 matches manifest.json's bytes (and
 * `expectedManifestSha256` if given, e.g. the value from GET /exports); every file listed in the
 * manifest is present with its byte size and sha256; no data file is missing and nothing unlisted
 * is present; ledger.jsonl holds exactly `records` lines, seqs since_seq+1..until_seq, and its chain
 * recomputed from start_hash ends at end_hash. Bad data is reported, never thrown.
 */
export async function verifyBundle(path: string, options: { expectedManifestSha256?: string } = {}): Promise<BundleReport> {
  const report: BundleReport = { ok: false, problems: [], manifestSha256: null, records: 0, org: null, window: null };
  try {
    const source = isBundleArchive(path) ? archiveSource(await readFile(path)) : await directorySource(path);
    await check(source, report, options.expectedManifestSha256);
  } catch (error) {
    // The bundle could not be read (missing path, bad archive, I/O error): a problem, not a crash.
    report.problems.push(`${path}: ${(error as Error).message}`);
  }
  // One line per problem, whatever the underlying messages (JSON.parse quotes the input) hold.
  report.problems = report.problems.map((p) => p.replace(/\s*\n\s*/g, ' '));
  report.ok = report.problems.length === 0;
  return report;
}

async function check(source: BundleSource, report: BundleReport, expectedManifestSha256: string | undefined): Promise<void> {
  const problems = report.problems;
  const manifestBytes = await source.read(MANIFEST_FILE);
  const sumBytes = await source.read(MANIFEST_SHA256_FILE);
  if (sumBytes === null) problems.push(`${MANIFEST_SHA256_FILE}: missing`);
  if (manifestBytes === null) {
    problems.push(`${MANIFEST_FILE}: missing`);
    return;
  }
  const actual = sha256Hex(manifestBytes);
  report.manifestSha256 = actual;
  if (sumBytes !== null) {
    const stated = parseManifestSha256Line(sumBytes.toString('utf8'));
    if (stated === null) problems.push(`${MANIFEST_SHA256_FILE}: not a sha256sum line for ${MANIFEST_FILE}`);
    else if (stated !== actual) problems.push(`${MANIFEST_FILE} does not match ${MANIFEST_SHA256_FILE}: ${MANIFEST_FILE} hashes to ${actual}, ${MANIFEST_SHA256_FILE} says ${stated}`);
  }
  const expected = expectedManifestSha256?.toLowerCase();
  if (expected !== undefined && expected !== actual) problems.push(`${MANIFEST_FILE}: sha256 ${actual} is not the expected ${expected}`);

  const parsed = parseManifest(manifestBytes.toString('utf8'));
  for (const p of parsed.problems) problems.push(`${MANIFEST_FILE}: ${p}`);
  const manifest = parsed.manifest;
  if (manifest === null) return;
  report.org = manifest.org;
  report.window = { since_seq: manifest.since_seq, until_seq: manifest.until_seq };

  const listed = new Set(manifest.files.map((f) => f.name));
  for (const name of source.names) {
    if (!listed.has(name) && name !== MANIFEST_FILE && name !== MANIFEST_SHA256_FILE) problems.push(`${name}: not listed in the manifest`);
  }
  let ledger: Buffer | null = null;
  for (const file of manifest.files) {
    const content = await source.read(file.name);
    if (content === null) {
      problems.push(`${file.name}: missing`);
      continue;
    }
    if (content.length !== file.bytes) problems.push(`${file.name}: ${content.length} bytes, the manifest says ${file.bytes}`);
    const digest = sha256Hex(content);
    if (digest !== file.sha256) problems.push(`${file.name}: sha256 ${digest} does not match the manifest's ${file.sha256}`);
    if (file.name === BUNDLE_DATA_FILES[0]) ledger = content;
  }
  if (ledger !== null) report.records = checkLedger(ledger, manifest, problems);
}

/** Recomputes the window's chain; returns the number of lines read. */
function checkLedger(content: Buffer, manifest: Manifest, problems: string[]): number {
  const name = BUNDLE_DATA_FILES[0];
  const lines = content.toString('utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  const verifier = new ChainVerifier({ startSeq: manifest.since_seq, startHash: Buffer.from(manifest.start_hash, 'hex') });
  for (const line of lines) {
    try {
      verifier.push(rowFromExport(JSON.parse(line) as ExportedRecord));
    } catch (error) {
      verifier.fail(`unreadable record (${(error as Error).message})`);
    }
  }
  const chain = verifier.report();
  if (chain.length !== manifest.records) problems.push(`${name}: ${chain.length} records, the manifest says ${manifest.records} (seqs ${manifest.since_seq + 1}..${manifest.until_seq})`);
  if (!chain.ok) {
    problems.push(`${name}: chain broken at seq ${chain.first_bad_seq}: ${chain.problem}`);
  } else {
    const end = chain.head ?? manifest.start_hash;
    if (end !== manifest.end_hash) problems.push(`${name}: chain ends at ${end}, the manifest's end_hash is ${manifest.end_hash}`);
  }
  return chain.length;
}

function archiveSource(archive: Buffer): BundleSource {
  let entries = readTarGz(archive);
  // An archive of the bundle's directory (`tar czf b.tgz bundle/`) holds it under one folder.
  const top = entries[0]?.name.split('/')[0];
  if (!entries.some((e) => e.name === MANIFEST_FILE) && top !== undefined && entries.every((e) => e.name.startsWith(`${top}/`))) {
    entries = entries.map((e) => ({ name: e.name.slice(top.length + 1), content: e.content }));
  }
  const byName = new Map(entries.map((e) => [e.name, e.content]));
  return { names: [...byName.keys()], read: (name) => Promise.resolve(byName.get(name) ?? null) };
}

async function directorySource(dir: string): Promise<BundleSource> {
  const names = await readdir(dir);
  return {
    names,
    read: async (name) => {
      if (!names.includes(name)) return null;
      try {
        return await readFile(join(dir, name));
      } catch (error) {
        if ((error as { code?: string }).code === 'EISDIR') return null;
        throw error;
      }
    },
  };
}
