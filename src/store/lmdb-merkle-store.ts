import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { open, type Database, type RootDatabase, type Transaction } from 'lmdb';
import type { Stripe } from '../domain/striped-tree.js';
import { ensureError } from '../errors.js';
import type { Logger } from '../log.js';
import { bootId, syncFile, tornReason, writeState } from './boot-marker.js';
import { FreeSpaceFloor } from './free-space.js';
import type { LmdbEnv } from './lmdb-env.js';
import type { MerkleStore } from './merkle-store.js';
import { storeWrite, storeWriteFailed } from './write-failure.js';

type StripeKey = [org: string, level: number, index: number];
/** How long proofs may read in one read transaction. */
const READ_TXN_MS = 1000;
/** The trees' environment, inside the data dir. */
export const MERKLE_DIR = 'merkle';

/**
 * Opens the trees' own LMDB environment in `<dataDir>/merkle`. The stripes are derived from the
 * ledger, so they are kept apart from it: their writes neither wait for the ledger's write lock nor
 * add to its fsyncs, and they are not synced at all (MDB_NOSYNC). A process that dies loses nothing
 * there (its writes are in the kernel's page cache), but a machine that loses power may leave the
 * file torn, and LMDB does not reliably tell (lmdb-js can crash the process opening one). So the
 * environment says in `state.json`, synced before any stripe is written, that it is open and since
 * which boot (Linux's boot id), and a clean close syncs the file and says it is closed. Found open
 * since another boot (or with no boot id to tell), without a readable state, or refused by LMDB,
 * it is deleted and made again empty, before LMDB reads it: the trees then rebuild from the ledger
 * in the background, their routes answering 503 meanwhile. Writes keep the data dir's free-space
 * floor; an environment that cannot be opened (a full disk) is opened by the first write that can,
 * and the start does not wait for it.
 */
export function openMerkleStore(dataDir: string, log: Logger, options: { boot?: string | null; minFreeBytes?: number } = {}): LmdbMerkleStore {
  const dir = join(dataDir, MERKLE_DIR);
  return new LmdbMerkleStore(dir, log, options.boot === undefined ? bootId() : options.boot, new FreeSpaceFloor(dataDir, options.minFreeBytes ?? 0));
}

/**
 * The environment opened and marked open, its torn state found and deleted first (see
 * openMerkleStore). Throws when it cannot be (a full disk): nothing was written then.
 */
function openMarked(dir: string, log: Logger, boot: string | null): RootDatabase {
  const why = existsSync(join(dir, 'data.mdb')) ? tornReason(dir, boot) : null;
  if (why !== null) discard(dir, log, why);
  let root: RootDatabase;
  try {
    root = openEnv(dir);
  } catch (error) {
    discard(dir, log, `it could not be opened: ${ensureError(error).message}`);
    root = openEnv(dir);
  }
  try {
    writeState(dir, { boot, open: true });
  } catch (error) {
    void root.close();
    throw error;
  }
  return root;
}

function openEnv(dir: string): RootDatabase {
  mkdirSync(dir, { recursive: true });
  return open({ path: dir, noSubdir: false, maxDbs: 2, mapSize: 2 * 1024 ** 3, noSync: true, overlappingSync: false, eventTurnBatching: false });
}

function discard(dir: string, log: Logger, why: string): void {
  log.warn({ dir, why }, 'the Merkle trees\' stored stripes may be damaged: they are deleted, and the trees rebuilt from the ledger');
  rmSync(dir, { recursive: true, force: true });
}


/**
 * Before the trees had an environment of their own, their stripes were a `merkle` table in the
 * ledger's: it is dropped (they are made again in the new one). Resolves to whether there was one.
 */
export async function dropLedgerEnvStripes(env: LmdbEnv): Promise<boolean> {
  if (!env.hasTable('merkle')) return false;
  await env.write(() => env.table('merkle').drop());
  return true;
}

/** LMDB adapter of MerkleStore: the `merkle` table of the trees' own environment, keyed [org, level, index], 8 KB values. */
export class LmdbMerkleStore implements MerkleStore {
  /** The environment and its table, once opened (see open); until then nothing is stored. */
  private env: { root: RootDatabase; table: Database<Buffer, StripeKey> } | null = null;
  /**
   * The read transaction proofs read hashes in, kept across requests: lmdb-js otherwise renews its
   * read transaction on every event-loop turn, which cost a proof more than its reads. Stored
   * stripes never change, so it only has to be new enough: it is dropped when a write of stripes
   * ends (they are read from memory until then) and after a second at most, so it never pins old
   * pages for long.
   */
  private reading: { txn: Transaction; timer: NodeJS.Timeout } | null = null;
  /** The two hashes (slots `pair`, `pair` + 1) of the stored stripe read last: stored stripes never change. */
  private lastPair: { org: string; level: number; index: number; pair: number; bytes: Buffer } | null = null;
  private closed = false;

  /** Opens the environment now if it can; otherwise the first write that can does (see open). */
  constructor(
    private readonly dir: string,
    private readonly log: Logger,
    private readonly boot: string | null,
    private readonly floor: FreeSpaceFloor,
  ) {
    try {
      this.open();
    } catch (error) {
      log.warn({ dir, err: ensureError(error) }, 'the Merkle trees\' environment cannot be opened yet (a full disk?): the trees are kept in memory and rebuilt from the ledger, and stored once it can');
    }
  }

  /**
   * The environment, opened (and marked open) on first need. While it cannot be, nothing is read
   * from it (the trees rebuild from the ledger, in memory) and writes fail to be tried again.
   */
  private open(): { root: RootDatabase; table: Database<Buffer, StripeKey> } {
    if (this.env !== null) return this.env;
    if (this.closed) throw new Error('the Merkle store is closed');
    this.floor.check();
    const root = openMarked(this.dir, this.log, this.boot);
    this.env = { root, table: root.openDB<Buffer, StripeKey>({ name: 'merkle', encoding: 'binary', cache: false }) };
    return this.env;
  }

  stripe(org: string, level: number, index: number): Buffer | undefined {
    return this.env?.table.get([org, level, index]);
  }

  hash(org: string, level: number, index: number, slot: number): Buffer | undefined {
    // A proof asks for its leaf and the leaf's sibling, one pair of one stripe: the pair read last is kept.
    const pair = slot - (slot % 2);
    const last = this.lastPair;
    if (last !== null && last.index === index && last.pair === pair && last.level === level && last.org === org) return last.bytes.subarray((slot - pair) * 32, (slot - pair) * 32 + 32);
    // Read in place (lmdb-js's shared buffer, valid until the next read) and copy the pair out:
    // a copy of each 8 KB stripe was most of a proof's cost.
    const table = this.env?.table;
    if (table === undefined) return undefined;
    this.reading ??= { txn: table.useReadTransaction(), timer: setTimeout(() => this.release(), READ_TXN_MS).unref() };
    const bytes = readFast(table, [org, level, index], this.reading.txn);
    if (bytes === undefined || bytes.length !== 256 * 32) return undefined; // missing, or short: damaged
    this.lastPair = { org, level, index, pair, bytes: Buffer.from(bytes.subarray(pair * 32, pair * 32 + 64)) };
    return this.lastPair.bytes.subarray((slot - pair) * 32, (slot - pair) * 32 + 32);
  }

  storedStripes(org: string): number {
    for (const key of this.env?.table.getKeys({ start: [org, 0, Infinity], end: [org, 0, -1], reverse: true, limit: 1 }) ?? []) return key[2] + 1;
    return 0;
  }

  async put(stripes: readonly { org: string; stripe: Stripe }[], drop: readonly string[] = []): Promise<void> {
    if (stripes.length === 0 && drop.length === 0) return;
    let table: Database<Buffer, StripeKey>;
    try {
      this.floor.check();
      table = this.open().table;
    } catch (error) {
      throw storeWriteFailed(error);
    }
    await storeWrite(
      table.transaction(() => {
        for (const org of drop) for (const key of table.getKeys({ start: [org, -1, -1], end: [org, Infinity, Infinity] })) void table.remove(key);
        for (const { org, stripe } of stripes) void table.put([org, stripe.level, stripe.index], stripe.bytes);
      }),
    );
    this.release();
  }

  /**
   * Ends the proofs' read transaction, syncs what was written to disk, says so in the state file
   * and closes the environment. After the trees' last write (MerkleTrees.close).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.release();
    const env = this.env;
    if (env === null) return;
    this.env = null;
    try {
      await env.root.committed;
      syncFile(join(this.dir, 'data.mdb'));
      await env.root.close();
      writeState(this.dir, { boot: this.boot, open: false });
    } catch (error) {
      // Left marked open: kept by the next start in this boot, rebuilt after a machine restart.
      this.log.warn({ dir: this.dir, err: ensureError(error) }, 'the Merkle trees\' environment could not be synced and marked closed');
    }
  }

  private release(): void {
    this.lastPair = null;
    if (this.reading === null) return;
    clearTimeout(this.reading.timer);
    this.reading.txn.done();
    this.reading = null;
  }
}

/** lmdb-js's getBinaryFast in a given transaction (it takes one; its types do not say so). */
function readFast(table: Database<Buffer, StripeKey>, key: StripeKey, transaction: Transaction): Buffer | undefined {
  return (table.getBinaryFast as (this: Database<Buffer, StripeKey>, id: StripeKey, options: { transaction: Transaction }) => Buffer | undefined).call(table, key, { transaction });
}
