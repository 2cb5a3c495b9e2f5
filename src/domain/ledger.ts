import { hash } from 'node:crypto';
import { canonicalize } from './jcs.js';
import { leafHash } from './merkle.js';
import type { LedgerRecord } from './records.js';

/**
 * The ledger hash rule (DESIGN §4):
 *   content_hash = SHA-256(JCS({seq, kind, recorded_at, agent_id, body}))
 *   chain_hash   = SHA-256(prev_hash bytes ‖ content_hash bytes), prev of seq 1 = 32 zero bytes.
 * Bodies are canonicalized once; rows keep that canonical text so nothing is encoded twice.
 */
export const GENESIS_HASH: Buffer = Buffer.alloc(32);

/** A ledger record as committed: the hashed fields plus its hashes. */
export interface LedgerRow {
  seq: number;
  kind: string;
  recordedAt: string;
  agentId: string | null;
  /** The body's canonical JSON (JCS). */
  bodyJson: string;
  contentHash: Buffer;
  prevHash: Buffer;
  chainHash: Buffer;
  /** Its Merkle leaf hash (DESIGN §10), when the batch hasher made it with the others; see rowLeafHash. */
  leafHash?: Buffer;
  /** The parsed body, when the row was made in this process (saves projections a parse). */
  body?: unknown;
  /** The typed record, once read (see parseRecord); null when the row cannot be read as one. */
  record?: LedgerRecord | null;
}

/** A record as printed by the audit export (one JSON line). */
export interface ExportedRecord {
  seq: number;
  kind: string;
  recorded_at: string;
  agent_id: string | null;
  body: unknown;
  content_hash: string;
  prev_hash: string;
  chain_hash: string;
}

/** JCS of {seq, kind, recorded_at, agent_id, body}, given the body's canonical text. Keys in JCS order. */
export function canonicalEntry(
  seq: number,
  kind: string,
  recordedAt: string,
  agentId: string | null,
  bodyJson: string,
): string {
  const agent = agentId === null ? 'null' : JSON.stringify(agentId);
  return `{"agent_id":${agent},"body":${bodyJson},"kind":${JSON.stringify(kind)},"recorded_at":${JSON.stringify(recordedAt)},"seq":${seq}}`;
}

/** A row's leaf in its org's Merkle tree (DESIGN §10): the bytes its content_hash covers. */
export function leafInput(row: Pick<LedgerRow, 'seq' | 'kind' | 'recordedAt' | 'agentId' | 'bodyJson'>): Buffer {
  return Buffer.from(canonicalEntry(row.seq, row.kind, row.recordedAt, row.agentId, row.bodyJson), 'utf8');
}

/** A row's Merkle leaf hash: the one the batch hasher made with the row, or computed now. */
export function rowLeafHash(row: LedgerRow): Buffer {
  return row.leafHash ?? leafHash(leafInput(row));
}

export function sha256(data: string | Buffer): Buffer {
  return hash('sha256', data, 'buffer');
}

export function chainStep(prev: Buffer, content: Buffer): Buffer {
  return hash('sha256', Buffer.concat([prev, content], 64), 'buffer');
}

/** Builds the next row of a chain. Pure: the caller supplies seq, time and the previous hash. */
export function makeRow(
  prev: Buffer,
  seq: number,
  kind: string,
  recordedAt: string,
  agentId: string | null,
  body: unknown,
  /** The body's JCS text when the caller already has it (must equal canonicalize(body)). */
  knownBodyJson?: string,
): LedgerRow {
  const bodyJson = knownBodyJson ?? canonicalize(body);
  const contentHash = sha256(canonicalEntry(seq, kind, recordedAt, agentId, bodyJson));
  return { seq, kind, recordedAt, agentId, bodyJson, contentHash, prevHash: prev, chainHash: chainStep(prev, contentHash), body };
}

/** The audit export line of a row, fields in the documented order. */
export function exportLine(row: LedgerRow): string {
  const agent = row.agentId === null ? 'null' : JSON.stringify(row.agentId);
  return (
    `{"seq":${row.seq},"kind":${JSON.stringify(row.kind)},"recorded_at":${JSON.stringify(row.recordedAt)},` +
    `"agent_id":${agent},"body":${row.bodyJson},"content_hash":"${row.contentHash.toString('hex')}",` +
    `"prev_hash":"${row.prevHash.toString('hex')}","chain_hash":"${row.chainHash.toString('hex')}"}`
  );
}

/** Turns an exported (parsed) record back into a row; the body is re-canonicalized. */
export function rowFromExport(record: ExportedRecord): LedgerRow {
  return {
    seq: record.seq,
    kind: record.kind,
    recordedAt: record.recorded_at,
    agentId: record.agent_id,
    bodyJson: canonicalize(record.body),
    contentHash: hexToHash(record.content_hash),
    prevHash: hexToHash(record.prev_hash),
    chainHash: hexToHash(record.chain_hash),
  };
}

function hexToHash(hex: unknown): Buffer {
  return typeof hex === 'string' && /^[0-9a-f]{64}$/.test(hex) ? Buffer.from(hex, 'hex') : Buffer.alloc(0);
}

export interface VerifyReport {
  ok: boolean;
  /** The last chain hash (hex) of the records read, or null for an empty ledger. */
  head: string | null;
  length: number;
  first_bad_seq: number | null;
  /** Why the first bad record failed, in plain words. */
  problem: string | null;
}

/**
 * Recomputes a chain record by record. Feed rows in order; it never throws on bad data but
 * remembers the first bad seq. `startSeq`/`startHash` allow verifying a window of a chain.
 * Rows come either decoded (`push`) or as raw hashes laid out in a buffer (`pushHashes`, for
 * batches hashed at once); both go through the same checks.
 */
export class ChainVerifier {
  private expectedSeq: number;
  /** The previous row's stored chain hash: 32 bytes at prevBuf[prevAt] (see settle()). */
  private prevBuf: Buffer = Buffer.alloc(32);
  private prevAt = 0;
  private readonly own = Buffer.alloc(32);
  private count = 0;
  private firstBad: number | null = null;
  private problem: string | null = null;
  private readonly watched: Buffer | null;
  private readonly scratch = Buffer.alloc(160);
  /** Seq at which the watched head hash appeared, if it did. */
  watchedSeq: number | null = null;

  constructor(options: { startSeq?: number; startHash?: Buffer; watchHead?: Buffer } = {}) {
    this.expectedSeq = (options.startSeq ?? 0) + 1;
    (options.startHash ?? GENESIS_HASH).copy(this.prevBuf);
    this.watched = options.watchHead ?? null;
  }

  /**
   * Checks the next row. `computed` may carry its content hash and its chain hash over the
   * row's own prev_hash (from a batch hashed at once); otherwise they are computed here.
   */
  push(row: LedgerRow, computed?: { content: Buffer; chain: Buffer }): void {
    const s = this.scratch;
    row.contentHash.copy(s, 0);
    row.prevHash.copy(s, 32);
    row.chainHash.copy(s, 64);
    let content = computed?.content;
    let chain = computed?.chain;
    if (content === undefined || chain === undefined) {
      content = sha256(canonicalEntry(row.seq, row.kind, row.recordedAt, row.agentId, row.bodyJson));
      chain = chainStep(row.prevHash.length === 32 ? row.prevHash : GENESIS_HASH, content);
    }
    content.copy(s, 96);
    chain.copy(s, 128);
    const wellFormed = row.contentHash.length === 32 && row.prevHash.length === 32 && row.chainHash.length === 32;
    this.pushHashes(row.seq, s, 0, s, 96, s, 128, wellFormed);
    this.settle();
  }

  /**
   * Checks the next row from hashes laid out in buffers: at `stored[at]` its content, prev and
   * chain hashes (32 bytes each), at `contents[c]` its recomputed content hash and at
   * `chains[h]` the chain hash recomputed over its stored prev_hash. The buffers must stay as
   * they are until `settle()`.
   */
  pushHashes(seq: number, stored: Buffer, at: number, contents: Buffer, c: number, chains: Buffer, h: number, wellFormed = true): void {
    this.count++;
    if (this.watched !== null && this.watchedSeq === null && this.watched.compare(stored, at + 64, at + 96) === 0) {
      this.watchedSeq = seq;
    }
    if (this.firstBad === null) {
      const fail = !wellFormed
        ? 'a hash is not 64 hex characters'
        : seq !== this.expectedSeq
          ? `expected seq ${this.expectedSeq}, found ${String(seq)}`
          : stored.compare(this.prevBuf, this.prevAt, this.prevAt + 32, at + 32, at + 64) !== 0
            ? 'prev_hash does not match the previous chain_hash'
            : contents.compare(stored, at, at + 32, c, c + 32) !== 0
              ? 'content_hash does not match the record'
              : chains.compare(stored, at + 64, at + 96, h, h + 32) !== 0
                ? 'chain_hash does not match'
                : null;
      if (fail !== null) {
        this.firstBad = Number.isInteger(seq) ? seq : this.expectedSeq;
        this.problem = fail;
      }
    }
    this.expectedSeq++;
    this.prevBuf = stored;
    this.prevAt = at + 64;
  }

  /** Copies what the verifier still refers to out of the caller's buffers (before reusing them). */
  settle(): void {
    if (this.prevBuf === this.own) return;
    this.prevBuf.copy(this.own, 0, this.prevAt, this.prevAt + 32);
    this.prevBuf = this.own;
    this.prevAt = 0;
  }

  /** Marks a record that could not even be read (bad JSON line) at the position expected next. */
  fail(problem: string): void {
    if (this.firstBad === null) {
      this.firstBad = this.expectedSeq;
      this.problem = problem;
    }
    this.expectedSeq++;
    this.count++;
  }

  report(): VerifyReport {
    return {
      ok: this.firstBad === null,
      head: this.count === 0 ? null : this.prevBuf.toString('hex', this.prevAt, this.prevAt + 32),
      length: this.count,
      first_bad_seq: this.firstBad,
      problem: this.problem,
    };
  }
}

/**
 * Whether a stored row's body parses as JSON (a byte flipped on disk can break it); parses it once.
 * Whether it is a record this version reads is parseRecord's to say (records.ts).
 */
export function bodyIsReadable(row: LedgerRow): boolean {
  try {
    rowBody(row);
    return true;
  } catch {
    return false;
  }
}

/** The parsed body of a row, parsed at most once however many consumers read it. */
export function rowBody(row: LedgerRow): Record<string, unknown> {
  return (row.body ??= JSON.parse(row.bodyJson)) as Record<string, unknown>;
}
