import { Layout } from '../domain/ledger-batch.js';
import type { LedgerRow } from '../domain/ledger.js';
import type { LedgerRecord } from '../domain/records.js';

/**
 * Binary layout of a stored ledger row (the seq is in the key). Fixed offsets for the three
 * hashes make reading cheap; text fields are UTF-8.
 *
 *   u8 version (1) · 32 content_hash · 32 prev_hash · 32 chain_hash
 *   u8 kind length · kind · u8 recorded_at length · recorded_at
 *   u16 agent_id length (0xffff = null) · agent_id · body JSON (the rest)
 */
const VERSION = 1;
const NULL_AGENT = 0xffff;

export function encodeRow(row: LedgerRow): Buffer {
  const kindLen = Buffer.byteLength(row.kind);
  const atLen = Buffer.byteLength(row.recordedAt);
  const agentLen = row.agentId === null ? 0 : Buffer.byteLength(row.agentId);
  const bodyLen = Buffer.byteLength(row.bodyJson);
  const buf = Buffer.allocUnsafe(1 + 96 + 1 + kindLen + 1 + atLen + 2 + agentLen + bodyLen);
  buf[0] = VERSION;
  row.contentHash.copy(buf, 1);
  row.prevHash.copy(buf, 33);
  row.chainHash.copy(buf, 65);
  let at = 97;
  buf[at++] = kindLen;
  at += buf.write(row.kind, at, 'utf8');
  buf[at++] = atLen;
  at += buf.write(row.recordedAt, at, 'utf8');
  buf.writeUInt16BE(row.agentId === null ? NULL_AGENT : agentLen, at);
  at += 2;
  if (row.agentId !== null) at += buf.write(row.agentId, at, 'utf8');
  buf.write(row.bodyJson, at, 'utf8');
  return buf;
}

/**
 * Decodes a stored row from its first `size` bytes. Nothing refers to `buf` afterwards (text is
 * decoded, the hashes are copied), so it may be LMDB's shared read buffer. Bytes that do not decode
 * (damage on disk) give an unreadable row rather than an exception: its body does not parse, so
 * a replay stops at it and the org is refused writes (`ledger_damaged`), and verification names
 * it; a read of the ledger never fails the whole service.
 */
export function decodeRow(seq: number, buf: Uint8Array, size = buf.byteLength): StoredRow {
  const b = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b[0] !== VERSION || size < 100) return unreadable(seq);
  try {
    return decodeFields(seq, b, size);
  } catch {
    return unreadable(seq);
  }
}

/** A row whose bytes do not decode: no kind, no time, and a body that is not JSON. */
function unreadable(seq: number): StoredRow {
  return new StoredRow(seq, '', '', null, '', Buffer.alloc(96));
}

function decodeFields(seq: number, b: Buffer, size: number): StoredRow {
  let at = 97;
  const kindLen = b[at++]!;
  const kind = b.toString('utf8', at, at + kindLen);
  at += kindLen;
  const atLen = b[at++]!;
  const recordedAt = b.toString('utf8', at, at + atLen);
  at += atLen;
  const agentLen = b.readUInt16BE(at);
  at += 2;
  let agentId: string | null = null;
  if (agentLen !== NULL_AGENT) {
    agentId = b.toString('utf8', at, at + agentLen);
    at += agentLen;
  }
  const hashes = Buffer.allocUnsafe(96); // one copy for the three hashes: `b` may be reused
  b.copy(hashes, 0, 1, 97);
  return new StoredRow(seq, kind, recordedAt, agentId, b.toString('utf8', at, size), hashes);
}

/**
 * A decoded row. The hashes are views made on demand: a replay reads only a few of them, and
 * making three buffers for every row was a good part of its cost.
 */
export class StoredRow implements LedgerRow {
  body: unknown = undefined; // parsed on demand (rowBody)
  record: LedgerRecord | null | undefined = undefined; // read on demand (parseRecord)

  constructor(
    /** Set by the reader when the row is decoded before its key (LmdbLedger.range). */
    public seq: number,
    readonly kind: string,
    readonly recordedAt: string,
    readonly agentId: string | null,
    readonly bodyJson: string,
    private readonly hashes: Buffer,
  ) {}

  get contentHash(): Buffer {
    return this.hashes.subarray(0, 32);
  }

  get prevHash(): Buffer {
    return this.hashes.subarray(32, 64);
  }

  get chainHash(): Buffer {
    return this.hashes.subarray(64, 96);
  }
}

/** Fills `layout` (see domain Layout) with where the fields of a stored row sit in its bytes. */
export function readLayout(b: Buffer, layout: Int32Array, size = b.length): void {
  let at = 97;
  layout[Layout.HASHES] = 1;
  const kindLen = b[at++]!;
  layout[Layout.KIND] = at;
  layout[Layout.KIND_END] = at += kindLen;
  const atLen = b[at++]!;
  layout[Layout.AT] = at;
  layout[Layout.AT_END] = at += atLen;
  const agentLen = b.readUInt16BE(at);
  at += 2;
  if (agentLen === NULL_AGENT) {
    layout[Layout.AGENT] = -1;
    layout[Layout.AGENT_END] = -1;
  } else {
    layout[Layout.AGENT] = at;
    layout[Layout.AGENT_END] = at += agentLen;
  }
  layout[Layout.BODY] = at;
  layout[Layout.BODY_END] = size;
}
