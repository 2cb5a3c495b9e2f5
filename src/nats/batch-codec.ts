import { Packr } from 'msgpackr';
import type { LedgerRow } from '../domain/ledger.js';
import { decodeRow, encodeRow, type StoredRow } from '../store/row-codec.js';

/**
 * The payload of one ledger message: one committed batch of one org, as the msgpack array
 *
 *   [1 (version), first seq, [row bytes, …]]
 *
 * each row in the stored-row layout of row-codec.ts (the seq is not in it: rows are consecutive,
 * so row i has seq first + i). Both ends must agree on nothing else; the bytes are not hashed
 * (hashes are over JCS), so the framing may change with its version.
 */
const VERSION = 1;
const packr = new Packr({ useRecords: false, moreTypes: false });

export interface EncodedBatch {
  first: number;
  /** Each row's bytes, as encodeRow made them. */
  rows: Uint8Array[];
}

/** Bytes of msgpack framing per message and per row, an upper bound (array and bin headers). */
const MESSAGE_FRAMING = 32;
const ROW_FRAMING = 8;

/**
 * Encodes consecutive rows as one payload or, when they would not fit in `maxBytes` (the
 * server's max_payload), as several consecutive ones, each under it. A single row over it throws,
 * as do rows that are not consecutive (a writer bug).
 */
export function encodeBatches(rows: readonly LedgerRow[], maxBytes: number): { first: number; payload: Buffer }[] {
  const first = rows[0]?.seq ?? 0;
  const encoded = rows.map((row, i) => {
    if (row.seq !== first + i) throw new Error(`ledger batch rows are not consecutive: seq ${row.seq} at index ${i} after ${first}`);
    return encodeRow(row);
  });
  const out: { first: number; payload: Buffer }[] = [];
  let start = 0;
  let size = MESSAGE_FRAMING;
  for (let i = 0; i < encoded.length; i++) {
    const bytes = encoded[i]!.byteLength + ROW_FRAMING;
    if (MESSAGE_FRAMING + bytes > maxBytes) throw new Error(`ledger row ${first + i} is ${encoded[i]!.byteLength} bytes, over the server's max_payload of ${maxBytes}`);
    if (size + bytes > maxBytes) {
      out.push({ first: first + start, payload: packr.pack([VERSION, first + start, encoded.slice(start, i)]) });
      start = i;
      size = MESSAGE_FRAMING;
    }
    size += bytes;
  }
  out.push({ first: first + start, payload: packr.pack([VERSION, first + start, encoded.slice(start)]) });
  return out;
}

/** The batch's first seq and row bytes; a payload that is not a batch throws. */
export function unpackBatch(data: Uint8Array): EncodedBatch {
  let value: unknown;
  try {
    value = packr.unpack(data);
  } catch (error) {
    throw new Error('a ledger message is not a batch (not msgpack)', { cause: error });
  }
  if (!Array.isArray(value) || value.length !== 3) throw new Error('a ledger message is not a batch');
  const [version, first, rows] = value as unknown[];
  if (version !== VERSION || typeof first !== 'number' || !Array.isArray(rows)) throw new Error(`a ledger message is not a batch of version ${VERSION}`);
  if (!rows.every((r): r is Uint8Array => r instanceof Uint8Array)) throw new Error('a ledger message holds a row that is not bytes');
  return { first, rows };
}

/** The rows of a batch from `fromSeq` on (an unreadable row decodes as such, see decodeRow). */
export function decodeBatch(batch: EncodedBatch, fromSeq = 1): StoredRow[] {
  const out: StoredRow[] = [];
  for (let i = Math.max(0, fromSeq - batch.first); i < batch.rows.length; i++) out.push(decodeRow(batch.first + i, batch.rows[i]!));
  return out;
}

/** Whether two batches hold the same rows, byte for byte. */
export function sameBatch(a: EncodedBatch, b: EncodedBatch): boolean {
  return a.first === b.first && a.rows.length === b.rows.length && a.rows.every((row, i) => Buffer.compare(row, b.rows[i]!) === 0);
}
