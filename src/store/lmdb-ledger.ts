import type { Database } from 'lmdb';
import * as orderedBinary from 'ordered-binary';
import { keyedFromRecord, type KeyedEvent } from '../domain/idempotency.js';
import { rowBody, type LedgerRow } from '../domain/ledger.js';
import { parseRecord } from '../domain/records.js';
import type { LedgerReader } from './ledger-reader.js';
import type { LmdbEnv } from './lmdb-env.js';
import { decodeRow, encodeRow, type StoredRow } from './row-codec.js';
import { storeWrite } from './write-failure.js';

type LedgerKey = [string, number];

/**
 * The ledger table of the LMDB environment, keyed [org, seq], rows in the binary layout of
 * row-codec.ts. There is no update and no delete. It reads for LedgerReader and the start-up
 * replay, and commits batches for the LMDB ledger log (lmdb-ledger-log.ts).
 */
export class LmdbLedger implements LedgerReader {
  private ledger!: Database<Buffer, LedgerKey>;
  /** The same rows decoded straight from LMDB's read buffer (no copy of each value first). */
  private ledgerRows!: Database<StoredRow, LedgerKey>;
  /** The same rows read for scanRaw: keys are not decoded and values are not copied. */
  private ledgerScan!: Database<null, LedgerKey>;
  /** Per org: value and version are the last seq (the append fence). */
  private tails!: Database<number, string>;
  /** [org, idempotency key] → the seq of the event recorded with it (written with the rows). */
  private keys!: Database<number, [string, string]>;

  /** Writes of commits made inside `together`, made when it returns (null: outside). */
  private gathered: (() => void)[] | null = null;

  /** The data dir this ledger lives in (replay and verification workers open it read-only). */
  readonly dir: string;

  constructor(private readonly env: LmdbEnv) {
    this.dir = env.dir;
    env.attach((root) => {
      this.ledger = root.openDB<Buffer, LedgerKey>({ name: 'ledger', encoding: 'binary', cache: false });
      this.ledgerScan = root.openDB<null, LedgerKey>({
        name: 'ledger',
        cache: false,
        keyEncoder: { writeKey: orderedBinary.writeKey, readKey: () => null, enableNullTermination: orderedBinary.enableNullTermination },
        encoder: { encode: () => { throw new Error('the scan handle is read-only'); }, decode: scanValue },
      } as never);
      this.ledgerRows = root.openDB<StoredRow, LedgerKey>({
        name: 'ledger',
        cache: false,
        encoder: { encode: () => { throw new Error('the row reader is read-only'); }, decode: (bytes: Uint8Array, size: number) => decodeRow(0, bytes, size) },
      } as never);
      this.tails = root.openDB<number, string>({ name: 'tails', useVersions: true });
      this.keys = root.openDB<number, [string, string]>({ name: 'idempotency' });
    });
    if (!env.readOnly) this.repairTails();
  }

  /** A tail behind its ledger (a data dir written before tails existed) is moved up to it. */
  private repairTails(): void {
    for (const org of this.orgs()) {
      const seq = this.last(org)?.seq ?? 0;
      if ((this.tails.get(org) ?? 0) < seq) this.tails.putSync(org, seq, seq);
    }
  }

  /**
   * Writes one org's consecutive rows if the org's last seq is still `expectedLastSeq`; resolves
   * true once they are durable, false (nothing written) for a stale or second writer. Commits may
   * be pipelined: they commit in the order made, and when one is refused every later one of that
   * org is too, so the ledger never gets a gap.
   */
  async commit(org: string, rows: readonly LedgerRow[], expectedLastSeq: number): Promise<boolean> {
    const last = rows[rows.length - 1];
    if (last === undefined) return true;
    // The fence lives in the write transaction: the org's tail version must still be the expected
    // last seq. No JavaScript runs on commit. Below the free-space floor it is refused before it is
    // queued, in the order commits are made (a later one then fails its fence, as after any refusal).
    const fence = expectedLastSeq === 0 ? (null as unknown as number) : expectedLastSeq; // null: no tail yet
    let flushed: PromiseLike<unknown> | undefined;
    const write = (): Promise<boolean> => this.env.write(() => {
      const commit = this.tails.ifVersion(org, fence, () => {
        for (const r of rows) {
          void this.ledger.put([org, r.seq], encodeRow(r));
          const key = idempotencyKeyOf(r);
          if (key !== undefined) void this.keys.put([org, key], r.seq);
        }
        void this.tails.put(org, last.seq, last.seq);
      }) as Promise<boolean> & { flushed?: PromiseLike<unknown> };
      flushed = commit.flushed;
      return commit;
    });
    const gathered = this.gathered;
    const written = gathered === null ? write() : new Promise<boolean>((resolve, reject) => gathered.push(() => void write().then(resolve, reject)));
    if (!(await written)) return false;
    if (this.env.durability === 'sync') await storeWrite(flushed ?? this.env.flushed());
    return true;
  }

  /**
   * Runs `run`; the commits it makes are written when it returns, in the order made, in one
   * transaction (each still fenced alone): the group commit of many orgs' batches of one turn.
   */
  together(run: () => void): void {
    if (this.gathered !== null) return run();
    const gathered: (() => void)[] = (this.gathered = []);
    try {
      run();
    } finally {
      this.gathered = null;
      if (gathered.length > 0) {
        this.env.together(() => {
          for (const write of gathered) write();
        });
      }
    }
  }

  /** The event the org recorded with `key`, as a retry with it is answered. */
  findKey(org: string, key: string): KeyedEvent | undefined {
    const seq = this.keys.get([org, key]);
    if (seq === undefined) return undefined;
    const row = this.get(org, seq);
    const record = row === undefined ? null : parseRecord(row);
    return row !== undefined && record?.kind === 'event' ? keyedFromRecord(row, record.agentId, record.body) : undefined;
  }

  last(org: string): LedgerRow | undefined {
    for (const { key, value } of this.ledger.getRange({ start: [org, Infinity], end: [org, 0], reverse: true, limit: 1 })) {
      return decodeRow(key[1], value);
    }
    return undefined;
  }

  get(org: string, seq: number): LedgerRow | undefined {
    const value = this.ledger.get([org, seq]);
    return value === undefined ? undefined : decodeRow(seq, value);
  }

  *range(org: string, fromSeq: number, toSeq = Number.MAX_SAFE_INTEGER): Iterable<LedgerRow> {
    // A replay reads every row once: decoding from the read buffer saves a copy of each value.
    for (const { key, value } of this.ledgerRows.getRange({ start: [org, fromSeq], end: [org, toSeq + 1] })) {
      value.seq = key[1];
      yield value;
    }
  }

  /**
   * Visits the stored bytes of rows fromSeq..toSeq in order, without decoding keys or copying
   * values (≈ 5× faster than a getRange): `visit` gets lmdb's shared read buffer, valid only during
   * the call, and the row's size. `seq` is the row's position (fromSeq, fromSeq + 1, …), not its
   * key: a missing row shows as a break in the chain at the position where it is missing.
   */
  scanRaw(org: string, fromSeq: number, toSeq: number, visit: (seq: number, bytes: Buffer, size: number) => void): void {
    let seq = fromSeq;
    const outer = scanVisitor;
    scanVisitor = (bytes, size) => visit(seq++, bytes, size);
    try {
      for (const _ of this.ledgerScan.getRange({ start: [org, fromSeq], end: [org, toSeq + 1] }));
    } finally {
      scanVisitor = outer;
    }
  }

  *orgs(): Iterable<string> {
    let after: string | null = null;
    for (;;) {
      const start: LedgerKey = after === null ? ['', 0] : [after, Infinity];
      let found: string | null = null;
      for (const key of this.ledger.getKeys({ start, limit: 1 })) found = key[0];
      if (found === null || found === after) return;
      yield found;
      after = found;
    }
  }
}

/** An event row's idempotency key; rows without one (nearly all) are told apart without a parse. */
function idempotencyKeyOf(row: LedgerRow): string | undefined {
  if (row.kind !== 'event' || !row.bodyJson.includes('"idempotency_key":')) return undefined;
  const key = rowBody(row).idempotency_key;
  return typeof key === 'string' ? key : undefined;
}

/** The visitor of the scan in progress: lmdb calls the scan handle's decoder once per value. */
let scanVisitor: ((bytes: Buffer, size: number) => void) | null = null;

function scanValue(bytes: Uint8Array, size: number): null {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, size);
  scanVisitor?.(buf, size);
  return null;
}
