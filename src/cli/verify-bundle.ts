import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readTarGz } from '../bundle/tar.js';
import { BUNDLE_DATA_FILES, BUNDLE_LOG_FILES, MANIFEST_FILE, MANIFEST_SHA256_FILE, parseManifest, parseManifestSha256Line, sha256Hex, type Manifest } from '../domain/bundle.js';
import { CHECKPOINT_FILE, MERKLE_FILE, parseMerkleFile, rootFromRange } from '../domain/bundle-log.js';
import { ChainVerifier, rowFromExport, rowLeafHash, type ExportedRecord } from '../domain/ledger.js';
import { openCheckpoint, unsignedText } from '../domain/log-monitor.js';
import { parseCheckpoint, type Checkpoint, type NoteKey } from '../domain/signed-note.js';

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
  /**
   * The log checkpoint the window was checked against (DESIGN §10), null when the bundle has none
   * (one from before the transparency log); `signed`: checked with the key given, else not checked.
   */
  log: { origin: string; size: number; root: string; signed: boolean } | null;
}

export interface VerifyBundleOptions {
  /** E.g. the value from GET /exports. */
  expectedManifestSha256?: string;
  /** The log's verifier key: checkpoint.txt must be signed by it (a bundle without one is refused). */
  key?: NoteKey;
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
 * recomputed from start_hash ends at end_hash; the window's leaves appended to merkle.json's range
 * make the root checkpoint.txt states for until_seq, and with `key`, the key signed it. Bad data is
 * reported, never thrown.
 */
export async function verifyBundle(path: string, options: VerifyBundleOptions = {}): Promise<BundleReport> {
  const report: BundleReport = { ok: false, problems: [], manifestSha256: null, records: 0, org: null, window: null, log: null };
  try {
    const source = isBundleArchive(path) ? archiveSource(await readFile(path)) : await directorySource(path);
    await check(source, report, options);
  } catch (error) {
    // The bundle could not be read (missing path, bad archive, I/O error): a problem, not a crash.
    report.problems.push(`${path}: ${(error as Error).message}`);
  }
  // One line per problem, whatever the underlying messages (JSON.parse quotes the input) hold.
  report.problems = report.problems.map((p) => p.replace(/\s*\n\s*/g, ' '));
  report.ok = report.problems.length === 0;
  return report;
}

async function check(source: BundleSource, report: BundleReport, options: VerifyBundleOptions): Promise<void> {
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
  const expected = options.expectedManifestSha256?.toLowerCase();
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
  const logFiles = new Map<string, Buffer>();
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
    if ((BUNDLE_LOG_FILES as readonly string[]).includes(file.name)) logFiles.set(file.name, content);
  }
  const leaves: Buffer[] = [];
  const before = problems.length;
  if (ledger !== null) report.records = checkLedger(ledger, manifest, problems, leaves);
  // A window whose chain does not hold is bad already; its leaves prove nothing more.
  const chainHolds = ledger !== null && problems.length === before;
  const checkpoint = logFiles.get(CHECKPOINT_FILE);
  const merkle = logFiles.get(MERKLE_FILE);
  if (checkpoint === undefined || merkle === undefined) {
    if (options.key !== undefined) problems.push(`${CHECKPOINT_FILE}: missing, so nothing is signed by the key given (a bundle from before the transparency log?)`);
    return;
  }
  if (chainHolds) report.log = checkLog(checkpoint, merkle, manifest, leaves, options.key, problems);
}

/**
 * Checks the bundle against the org's log (DESIGN §10): checkpoint.txt is a checkpoint of the org's
 * log at until_seq (signed by `key` when given), and merkle.json's range before the window with the
 * window's leaves makes its root.
 */
function checkLog(checkpointNote: Buffer, merkleText: Buffer, manifest: Manifest, leaves: Buffer[], key: NoteKey | undefined, problems: string[]): BundleReport['log'] {
  const note = checkpointNote.toString('utf8');
  let checkpoint: Checkpoint;
  if (key !== undefined) {
    const opened = openCheckpoint(note, key, manifest.org);
    if (!opened.ok) {
      const why = {
        signature: `not signed by the key ${key.name}+${key.keyId.toString('hex')}`,
        malformed: 'signed, but not a checkpoint (origin, size, base64 root)',
        origin: opened.problem === 'origin' ? `the checkpoint of the log ${opened.origin}, not ${opened.expected}` : '',
      }[opened.problem];
      problems.push(`${CHECKPOINT_FILE}: ${why}`);
      return null;
    }
    checkpoint = opened.checkpoint;
  } else {
    const parsed = parseCheckpoint(unsignedText(note));
    if (parsed === null) {
      problems.push(`${CHECKPOINT_FILE}: not a signed checkpoint note (origin, size, base64 root, signatures)`);
      return null;
    }
    if (!parsed.origin.endsWith(`/vigil/${manifest.org}`)) problems.push(`${CHECKPOINT_FILE}: the checkpoint of the log ${parsed.origin}, not of org ${manifest.org}`);
    checkpoint = parsed;
  }
  if (checkpoint.size !== manifest.until_seq) problems.push(`${CHECKPOINT_FILE}: size ${checkpoint.size}, the window ends at seq ${manifest.until_seq}`);
  const parsed = parseMerkleFile(merkleText.toString('utf8'));
  if ('problem' in parsed) {
    problems.push(`${MERKLE_FILE}: ${parsed.problem}`);
    return null;
  }
  const merkle = parsed.file;
  if (merkle.since_seq !== manifest.since_seq || merkle.tree_size !== manifest.until_seq) {
    problems.push(`${MERKLE_FILE}: covers ${merkle.since_seq} leaves up to size ${merkle.tree_size}, the window is ${manifest.since_seq}..${manifest.until_seq}`);
    return null;
  }
  const root = rootFromRange(merkle.range, leaves);
  if (!root.equals(checkpoint.root)) {
    problems.push(`${CHECKPOINT_FILE}: signs root ${checkpoint.root.toString('base64')} for size ${checkpoint.size}; ${MERKLE_FILE}'s range with the window's records makes ${root.toString('base64')}`);
  }
  return { origin: checkpoint.origin, size: checkpoint.size, root: checkpoint.root.toString('base64'), signed: key !== undefined };
}

/** Recomputes the window's chain, collecting each record's Merkle leaf hash in `leaves`; returns the number of lines read. */
function checkLedger(content: Buffer, manifest: Manifest, problems: string[], leaves: Buffer[]): number {
  const name = BUNDLE_DATA_FILES[0];
  const lines = content.toString('utf8').split('\n');
  if (lines.at(-1) === '') lines.pop();
  const verifier = new ChainVerifier({ startSeq: manifest.since_seq, startHash: Buffer.from(manifest.start_hash, 'hex') });
  for (const line of lines) {
    try {
      const row = rowFromExport(JSON.parse(line) as ExportedRecord);
      verifier.push(row);
      leaves.push(rowLeafHash(row));
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
