import { mkdirSync } from 'node:fs';
import { open, type Database, type Key, type RootDatabase, type RootDatabaseOptionsWithPath } from 'lmdb';
import { FreeSpaceFloor } from './free-space.js';
import { storeWrite } from './write-failure.js';

export type Durability = 'sync' | 'process';

/**
 * One LMDB environment (the data dir): the tables of every LMDB adapter live in it. Durability:
 * every write resolves after LMDB's commit (survives kill -9); with `sync` it also waits for the
 * flush to disk (survives power loss).
 */
export class LmdbEnv {
  private root!: RootDatabase;
  /** What each adapter opens in the environment, run again when it is reopened. */
  private readonly openers: ((root: RootDatabase) => void)[] = [];
  readonly readOnly: boolean;
  /** Writes are refused while the data dir's disk has less free (VIGIL_MIN_FREE_MB; none when 0). */
  private readonly floor: FreeSpaceFloor;

  constructor(
    readonly dir: string,
    readonly durability: Durability = 'sync',
    options: { readOnly?: boolean; minFreeBytes?: number } = {},
  ) {
    this.readOnly = options.readOnly === true;
    this.floor = new FreeSpaceFloor(dir, options.minFreeBytes ?? 0);
    if (!this.readOnly) mkdirSync(dir, { recursive: true });
    this.openRoot();
  }

  /** Runs `open` now and again after every reopen: an adapter's table handles are its to renew. */
  attach(open: (root: RootDatabase) => void): void {
    open(this.root);
    this.openers.push(open);
  }

  /**
   * Closes and reopens the environment. With remapChunks, LMDB keeps up to 8k unused 64 KB chunk
   * mappings of the data file cached (up to 512 MB, counted in RSS); after a start-up replay has
   * read the whole ledger, this lets them go. Only while nothing is being written or read.
   */
  async reopen(): Promise<void> {
    await this.root.close();
    this.openRoot();
    for (const open of this.openers) open(this.root);
  }

  /**
   * A named table for stores that live beside the ledger (record-scoring keys, demo studio agents),
   * opened after start-up. Values are msgpack; writes through it are not fenced.
   */
  table<K extends Key, V>(name: string): Database<V, K> {
    return this.root.openDB<V, K>({ name });
  }

  /**
   * Starts a write of an adapter (`start` returns lmdb-js's promise of it) unless the disk is below
   * the free-space floor, which refuses it before LMDB sees it (see FreeSpaceFloor); a failed write
   * is a retryable refusal too (see storeWrite). The floor is checked when this is called, so
   * writes started in turn are checked in turn.
   */
  async write<T>(start: () => PromiseLike<T>): Promise<T> {
    this.floor.check();
    return storeWrite(start());
  }

  /**
   * Runs `run` and makes the writes it starts one transaction (lmdb-js's batch), each keeping its
   * own promise and condition. Those report every failure; the batch's own promise is only kept
   * from ending the process unhandled (see storeWrite).
   */
  together(run: () => void): void {
    storeWrite(this.root.batch(run)).catch(() => {});
  }

  /** Whether the environment has a named table `name` (their names are the keys of its main table). */
  hasTable(name: string): boolean {
    for (const key of this.root.getKeys({ start: name, limit: 1 })) return key === name;
    return false;
  }

  /** Resolves once everything written so far is durable (as the durability mode says). */
  async flushed(): Promise<void> {
    if (this.durability === 'sync') await storeWrite(this.root.flushed);
  }

  close(): Promise<void> {
    return this.root.close();
  }

  private openRoot(): void {
    this.root = open(lmdbOptions(this.dir, this.readOnly));
  }
}

/**
 * How the data dir's environment is opened (also by a test holding its write lock from another
 * process, which must open it as this process does).
 * - separateFlushed: each write's promise carries its own `flushed`, so a batch waits for the
 *   flush of its own transaction, not for that of whatever committed after it.
 * - noSubdir: false, or lmdb-js would take a dir named like `data.v1` for a file name.
 * - eventTurnBatching: false, because lmdb-js's own per-turn batch leaves a promise that rejects,
 *   unhandled, when its commit fails (a full disk ended the process); our writes are batched
 *   already, and its write thread still folds queued batches into one transaction.
 */
export function lmdbOptions(dir: string, readOnly: boolean): RootDatabaseOptionsWithPath {
  return {
    path: dir,
    noSubdir: false,
    maxDbs: 32,
    mapSize: 2 * 1024 ** 3,
    remapChunks: true,
    separateFlushed: true,
    eventTurnBatching: false,
    readOnly,
  };
}
