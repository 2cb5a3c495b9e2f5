import { hash } from 'node:crypto';
import { z } from 'zod';
import { BUNDLE_LOG_FILES } from './bundle-log.js';

/**
 * The export bundle format (vigil-bundle/1): a window of one org's ledger plus its projections,
 * described by manifest.json and pinned by manifest.sha256. Pure: the caller supplies the data
 * files and the creation time.
 */

/** The data files of a bundle, in this order; manifest.json and manifest.sha256 come on top. */
export const BUNDLE_DATA_FILES = ['ledger.jsonl', 'cards.json', 'incidents.jsonl', 'oversight.jsonl'] as const;
/**
 * The log files (DESIGN §10), after the data files, in this order: in every bundle built since the
 * transparency log, both or neither (a bundle from before it has neither).
 */
export { BUNDLE_LOG_FILES };
export const MANIFEST_FILE = 'manifest.json';
export const MANIFEST_SHA256_FILE = 'manifest.sha256';
export const BUNDLE_FORMAT = 'vigil-bundle/1';

export interface ManifestFile {
  name: string;
  bytes: number;
  sha256: string;
}

export interface Manifest {
  format: 'vigil-bundle/1';
  org: string;
  /** Exclusive. */
  since_seq: number;
  /** Inclusive. */
  until_seq: number;
  /** until_seq - since_seq: the ledger window is always complete, whatever the agents filter. */
  records: number;
  /** Chain hash at since_seq (64 zeros when since_seq is 0). */
  start_hash: string;
  /** Chain hash at until_seq. */
  end_hash: string;
  /** Sorted, unique. */
  policy_digests: string[];
  /** The agents filter, null when none. */
  agents: string[] | null;
  files: ManifestFile[];
  created_at: string;
}

export interface BundleFile {
  name: string;
  content: Buffer;
}

export interface BuiltBundle {
  manifest: Manifest;
  manifestText: string;
  manifestSha256: string;
  files: BundleFile[];
}

export type BundleInput = Omit<Manifest, 'format' | 'records' | 'files'> & { data: BundleFile[] };

const HEX64 = /^[0-9a-f]{64}$/;

export function sha256Hex(data: Buffer | string): string {
  return hash('sha256', data, 'hex');
}

/**
 * Builds the manifest over the data files (hex sha256 + byte size each) and returns every file of
 * the bundle: the data files in BUNDLE_DATA_FILES order, manifest.json (2-space JSON + '\n', keys in
 * Manifest order) and manifest.sha256 (sha256sum format). `data` must hold exactly the data files;
 * anything else, or an inconsistent window, is a caller bug and throws.
 */
export function buildBundle(input: BundleInput): BuiltBundle {
  const data = orderDataFiles(input.data);
  if (!Number.isSafeInteger(input.since_seq) || !Number.isSafeInteger(input.until_seq) || input.since_seq < 0 || input.until_seq < input.since_seq) {
    throw new RangeError(`bundle window ${input.since_seq}..${input.until_seq} is not 0 <= since_seq <= until_seq`);
  }
  if (!HEX64.test(input.start_hash) || !HEX64.test(input.end_hash)) throw new RangeError('bundle start_hash and end_hash must be 64 lowercase hex');
  const manifest: Manifest = {
    format: BUNDLE_FORMAT,
    org: input.org,
    since_seq: input.since_seq,
    until_seq: input.until_seq,
    records: input.until_seq - input.since_seq,
    start_hash: input.start_hash,
    end_hash: input.end_hash,
    policy_digests: [...new Set(input.policy_digests)].sort(),
    agents: input.agents === null ? null : [...input.agents],
    files: data.map((f) => ({ name: f.name, bytes: f.content.length, sha256: sha256Hex(f.content) })),
    created_at: input.created_at,
  };
  const manifestText = `${JSON.stringify(manifest, null, 2)}\n`;
  const manifestBytes = Buffer.from(manifestText, 'utf8');
  const manifestSha256 = sha256Hex(manifestBytes);
  return {
    manifest,
    manifestText,
    manifestSha256,
    files: [
      ...data,
      { name: MANIFEST_FILE, content: manifestBytes },
      { name: MANIFEST_SHA256_FILE, content: Buffer.from(manifestSha256Line(manifestSha256), 'utf8') },
    ],
  };
}

function orderDataFiles(data: BundleFile[]): BundleFile[] {
  const byName = new Map<string, BundleFile>();
  for (const file of data) {
    if (!([...BUNDLE_DATA_FILES, ...BUNDLE_LOG_FILES] as readonly string[]).includes(file.name)) throw new RangeError(`not a bundle data file: ${file.name}`);
    if (byName.has(file.name)) throw new RangeError(`bundle data file given twice: ${file.name}`);
    byName.set(file.name, file);
  }
  const logFiles = BUNDLE_LOG_FILES.filter((name) => byName.has(name));
  if (logFiles.length === 1) throw new RangeError(`bundle log files come together: ${logFiles[0]} without the other`);
  return [...BUNDLE_DATA_FILES, ...logFiles].map((name) => {
    const file = byName.get(name);
    if (file === undefined) throw new RangeError(`bundle data file missing: ${name}`);
    return file;
  });
}

/** The manifest.sha256 text: `<hex>  manifest.json\n`, as `sha256sum manifest.json` prints it. */
export function manifestSha256Line(hex: string): string {
  return `${hex}  ${MANIFEST_FILE}\n`;
}

/** The hex digest in a manifest.sha256 text (binary-mode `*` accepted), or null when it is not one. */
export function parseManifestSha256Line(text: string): string | null {
  const match = /^([0-9a-f]{64}) [ *]manifest\.json\n?$/.exec(text);
  return match?.[1] ?? null;
}

const fileName = z.string().regex(/^[A-Za-z0-9._-]{1,100}$/, 'a plain file name').refine((n) => n !== '.' && n !== '..', 'a plain file name');
const hex64 = z.string().regex(HEX64, '64 lowercase hex characters');
const seq = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

const manifestSchema = z.object({
  format: z.literal(BUNDLE_FORMAT),
  org: z.string().min(1),
  since_seq: seq,
  until_seq: seq,
  records: seq,
  start_hash: hex64,
  end_hash: hex64,
  policy_digests: z.array(z.string()),
  agents: z.array(z.string()).nullable(),
  files: z.array(z.object({ name: fileName, bytes: z.number().int().nonnegative(), sha256: hex64 })),
  created_at: z.string(),
});

/** `manifest` is null when the text is not a manifest at all; otherwise `problems` lists broken rules between fields. */
export interface ParsedManifest {
  manifest: Manifest | null;
  problems: string[];
}

/**
 * Reads manifest.json's text: its shape, then the rules between fields (window and record count,
 * genesis start hash, sorted digests, unique file names, every data file listed). Problems are
 * values, each a sentence about one field.
 */
export function parseManifest(text: string): ParsedManifest {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { manifest: null, problems: [`not JSON (${(error as Error).message.replace(/\s*\n\s*/g, ' ')})`] };
  }
  const parsed = manifestSchema.safeParse(json);
  if (!parsed.success) {
    return { manifest: null, problems: parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`) };
  }
  const m = parsed.data;
  const problems: string[] = [];
  if (m.until_seq < m.since_seq) problems.push(`until_seq ${m.until_seq} is before since_seq ${m.since_seq}`);
  if (m.records !== m.until_seq - m.since_seq) problems.push(`records is ${m.records}, the window ${m.since_seq}..${m.until_seq} holds ${m.until_seq - m.since_seq}`);
  if (m.since_seq === 0 && m.start_hash !== '0'.repeat(64)) problems.push('start_hash must be 64 zeros when since_seq is 0');
  const digests = [...new Set(m.policy_digests)].sort();
  if (digests.length !== m.policy_digests.length || digests.some((d, i) => d !== m.policy_digests[i])) problems.push('policy_digests are not sorted and unique');
  const names = new Set<string>();
  for (const f of m.files) {
    if (names.has(f.name)) problems.push(`files lists ${f.name} twice`);
    if (f.name === MANIFEST_FILE || f.name === MANIFEST_SHA256_FILE) problems.push(`files must not list ${f.name}`);
    names.add(f.name);
  }
  for (const name of BUNDLE_DATA_FILES) if (!names.has(name)) problems.push(`files does not list ${name}`);
  const logListed = BUNDLE_LOG_FILES.filter((name) => names.has(name));
  if (logListed.length === 1) problems.push(`files lists ${logListed[0]} without ${BUNDLE_LOG_FILES.find((n) => n !== logListed[0])}`);
  return { manifest: m, problems };
}
