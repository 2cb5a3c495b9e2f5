import type { JetStreamManager } from '@nats-io/jetstream';
import type { CommittedBatch } from '../bus/ledger-log.js';
import { GENESIS_HASH, type LedgerRow } from '../domain/ledger.js';
import { VigilError } from '../errors.js';
import { decodeBatch, unpackBatch } from './batch-codec.js';
import { ledgerSubject, type LedgerStreamNames } from './ledger-stream.js';

/** What the ledger replica compares: the rows it holds, and the stream's. */

/** A row of an org as the next one must chain onto it. */
export interface Tail {
  seq: number;
  hash: Buffer;
}

/** An org's last batch in the stream: its stream sequence, and its last row. */
export interface StreamTail extends Tail {
  /** The stream sequence (0: the org has no batch). */
  streamSeq: number;
}

export function tailAt(row: LedgerRow): Tail {
  return { seq: row.seq, hash: Buffer.from(row.chainHash) };
}

/** Why `row` cannot follow `tail` (a gap, or a row chained onto another one), or null if it can. */
export function misfit(tail: Tail, row: LedgerRow): string | null {
  if (row.seq !== tail.seq + 1) return `rows ${tail.seq + 1}..${row.seq - 1} never came`;
  if (!Buffer.from(row.prevHash).equals(tail.hash)) return `row ${row.seq} does not chain onto row ${tail.seq} as held here`;
  return null;
}

/** The org's last batch in the stream as its leader has it now (one message get). */
export async function lastStreamBatch(jsm: JetStreamManager, names: LedgerStreamNames, org: string): Promise<StreamTail> {
  const message = await jsm.streams.getMessage(names.stream, { last_by_subj: ledgerSubject(names, org) });
  if (message === null) return { streamSeq: 0, seq: 0, hash: GENESIS_HASH };
  const batch = unpackBatch(message.data);
  const seq = batch.first + batch.rows.length - 1;
  return { streamSeq: message.seq, seq, hash: Buffer.from(decodeBatch(batch, seq)[0]!.chainHash) };
}

/**
 * The org's last batch in the stream as its leader has it now, every row of it, with its stream
 * sequence as fence (one message get; null: the org has none).
 */
export async function lastStreamRows(jsm: JetStreamManager, names: LedgerStreamNames, org: string): Promise<CommittedBatch | null> {
  const message = await jsm.streams.getMessage(names.stream, { last_by_subj: ledgerSubject(names, org) });
  return message === null ? null : { org, rows: decodeBatch(unpackBatch(message.data)), fence: message.seq };
}

/** Where `batch` leaves the org (null: no batch). */
export function streamTail(batch: CommittedBatch | null): StreamTail {
  const last = batch?.rows[batch.rows.length - 1];
  return batch === null || last === undefined ? { streamSeq: 0, seq: 0, hash: GENESIS_HASH } : { streamSeq: batch.fence, ...tailAt(last) };
}

/** The rows of `batch` past `tail` if they continue it, or null if they leave a gap or chain onto another row. */
export function continuing(tail: Tail, batch: CommittedBatch): readonly LedgerRow[] | null {
  const newer = batch.rows.filter((row) => row.seq > tail.seq);
  return newer.length === 0 || misfit(tail, newer[0]!) === null ? newer : null;
}

/** A keyed read or a writer's recovery that cannot be served from this node's copy now: 503, try again. */
export function behind(message: string, cause?: unknown): VigilError {
  return new VigilError('unavailable', message, undefined, { retryAfterSeconds: 1, ...(cause === undefined ? {} : { cause }) });
}
