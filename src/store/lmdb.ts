import { mkdirSync } from 'node:fs';
import { open, type Database, type Key, type RootDatabase } from 'lmdb';
import * as orderedBinary from 'ordered-binary';
import type { LedgerRow } from '../domain/ledger.js';
import type { AppendOptions, AppendOutcome, LedgerStore } from './ledger-store.js';
import { decodeRow, encodeRow, type StoredRow } from './row-codec.js';
import type { KeyRecord, OrgRecord, RegistryStore } from './registry-store.js';
import type { Snapshot, SnapshotStore } from './snapshot-store.js';
import { LmdbWebhookTables } from './lmdb-webhooks.js';
import type { DeliveryRecord, WebhookRecord, WebhookStore } from './webhook-store.js';
import { storeWrite } from './write-failure.js';

export type Durability = 'sync' | 'process';

type LedgerKey = [string, number];

/**
 * LMDB adapter for the ledger and registry (one environment, several named databases).
 * Durability: every write resolves after LMDB's commit (survives kill -9); with `sync` it also
 * waits for the flush to disk (survives power loss). lmdb-js batches all writes of one event-loop
 * turn into one transaction, which is our group commit.
 */
export class LmdbStore implements LedgerStore, RegistryStore, SnapshotStore, WebhookStore {
  private root!: RootDatabase;
  /** Rows in the binary layout of row-codec.ts. */
  private ledger!: Database<Buffer, LedgerKey>;
  /** The same rows decoded straight from LMDB's read buffer (no copy of each value first). */
  private ledgerRows!: Database<StoredRow, LedgerKey>;
  /** The same rows read for scanRaw: keys are not decoded and values are not copied. */
  private ledgerScan!: Database<null, LedgerKey>;
  private orgsDb!: Database<OrgRecord, string>;
  private keysDb!: Database<KeyRecord, string>;
  /** Per org: value and version are the last seq (the append fence). */
  private tails!: Database<number, string>;
  private snapshots!: Database<Snapshot, string>;
  /** Webhooks and deliveries (lmdb-webhooks.ts), in the same environment. */
  private hooks!: LmdbWebhookTables;
  private readonly readOnly: boolean;

  constructor(
    readonly dir: string,
    private readonly durability: Durability = 'sync',
    options: { readOnly?: boolean } = {},
  ) {
    this.readOnly = options.readOnly === true;
    if (!this.readOnly) mkdirSync(dir, { recursive: true });
    this.openEnv();
    if (!this.readOnly) {
      this.repairTails();
      this.hooks.seedDeliveryUsage();
    }
  }

  /**
   * Closes and reopens the environment. With remapChunks, LMDB keeps up to 8k unused 64 KB chunk
   * mappings of the data file cached (up to 512 MB, counted in RSS); after a start-up replay has
   * read the whole ledger, this lets them go. Only while nothing is being written.
   */
  async reopen(): Promise<void> {
    await this.root.close();
    this.openEnv();
  }

  private openEnv(): void {
    // separateFlushed: each write's promise carries its own `flushed`, so a batch waits for the
    // flush of its own transaction, not for that of whatever committed after it.
    // noSubdir: false, or lmdb-js would take a dir named like `data.v1` for a file name.
    // eventTurnBatching: false, because lmdb-js's own per-turn batch leaves a promise that rejects,
    // unhandled, when its commit fails (a full disk ended the process); our writes are batched
    // already, and its write thread still folds queued batches into one transaction.
    this.root = open({
      path: this.dir,
      noSubdir: false,
      maxDbs: 32,
      mapSize: 2 * 1024 ** 3,
      remapChunks: true,
      separateFlushed: true,
      eventTurnBatching: false,
      readOnly: this.readOnly,
    });
    this.ledger = this.root.openDB<Buffer, LedgerKey>({ name: 'ledger', encoding: 'binary', cache: false });
    this.ledgerScan = this.root.openDB<null, LedgerKey>({
      name: 'ledger',
      cache: false,
      keyEncoder: { writeKey: orderedBinary.writeKey, readKey: () => null, enableNullTermination: orderedBinary.enableNullTermination },
      encoder: { encode: () => { throw new Error('the scan handle is read-only'); }, decode: scanValue },
    } as never);
    this.ledgerRows = this.root.openDB<StoredRow, LedgerKey>({
      name: 'ledger',
      cache: false,
      encoder: { encode: () => { throw new Error('the row reader is read-only'); }, decode: (bytes: Uint8Array, size: number) => decodeRow(0, bytes, size) },
    } as never);
    this.orgsDb = this.root.openDB<OrgRecord, string>({ name: 'orgs' });
    this.keysDb = this.root.openDB<KeyRecord, string>({ name: 'keys' });
    this.tails = this.root.openDB<number, string>({ name: 'tails', useVersions: true });
    this.snapshots = this.root.openDB<Snapshot, string>({ name: 'snapshots' });
    this.hooks = new LmdbWebhookTables(this.root, () => this.durable());
  }

  /** A tail behind its ledger (a data dir written before tails existed) is moved up to it. */
  private repairTails(): void {
    for (const org of this.orgs()) {
      const seq = this.last(org)?.seq ?? 0;
      if ((this.tails.get(org) ?? 0) < seq) this.tails.putSync(org, seq, seq);
    }
  }

  async append(org: string, rows: readonly LedgerRow[], expectedLastSeq: number, options?: AppendOptions): Promise<AppendOutcome> {
    const last = rows[rows.length - 1];
    if (last === undefined) {
      options?.onCommitted?.(true);
      return { ok: true };
    }
    // The fence lives in the write transaction: the org's tail version must still be the expected
    // last seq. A stale writer is refused, and when one pipelined batch fails every later one of
    // that org fails with it, so the ledger never gets a gap. No JavaScript runs on commit.
    const fence = expectedLastSeq === 0 ? (null as unknown as number) : expectedLastSeq; // null: no tail yet
    const commit = this.tails.ifVersion(org, fence, () => {
      for (const r of rows) {
        void this.ledger.put([org, r.seq], encodeRow(r));
      }
      void this.tails.put(org, last.seq, last.seq);
    }) as Promise<boolean> & { flushed?: PromiseLike<unknown> };
    const flushed = commit.flushed;
    let written = false;
    try {
      written = await storeWrite(commit);
    } finally {
      options?.onCommitted?.(written);
    }
    if (!written) return { ok: false, reason: 'conflict' };
    if (this.durability === 'sync') await storeWrite(flushed ?? this.root.flushed);
    return { ok: true };
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

  getOrg(slug: string): OrgRecord | undefined {
    return this.orgsDb.get(slug);
  }

  async putOrg(org: OrgRecord): Promise<void> {
    await storeWrite(this.orgsDb.put(org.slug, org));
    await this.durable();
  }

  listOrgs(): OrgRecord[] {
    return [...this.orgsDb.getRange({}).map(({ value }) => value)];
  }

  getKey(hash: string): KeyRecord | undefined {
    return this.keysDb.get(hash);
  }

  async putKey(key: KeyRecord): Promise<void> {
    await storeWrite(this.keysDb.put(key.hash, key));
    await this.durable();
  }

  getSnapshot(name: string, org: string): Snapshot | undefined {
    return this.snapshots.get(`${name}\u0000${org}`);
  }

  async putSnapshot(name: string, org: string, snapshot: Snapshot): Promise<void> {
    await storeWrite(this.snapshots.put(`${name}\u0000${org}`, snapshot));
    await this.durable();
  }

  snapshotOrgs(name: string): string[] {
    const prefix = `${name}\u0000`;
    return [...this.snapshots.getKeys({ start: prefix, end: `${name}\u0001` })].map((k) => k.slice(prefix.length));
  }

  /**
   * A named table of the same environment, for stores that live beside the ledger (record-scoring
   * keys, demo studio agents). Values are msgpack; writes through it are not fenced.
   */
  table<K extends Key, V>(name: string): Database<V, K> {
    return this.root.openDB<V, K>({ name });
  }

  /** Resolves once everything written so far is durable (as the store's durability mode says). */
  async flushed(): Promise<void> {
    await this.durable();
  }

  listAllWebhooks(): WebhookRecord[] {
    return this.hooks.listAllWebhooks();
  }

  putWebhook(webhook: WebhookRecord): Promise<void> {
    return this.hooks.putWebhook(webhook);
  }

  putDeliveries(deliveries: readonly DeliveryRecord[], cursors?: ReadonlyMap<string, number>): Promise<void> {
    return this.hooks.putDeliveries(deliveries, cursors);
  }

  listDeliveries(org: string, webhookId: number, limit: number): DeliveryRecord[] {
    return this.hooks.listDeliveries(org, webhookId, limit);
  }

  queuedDeliveries(): DeliveryRecord[] {
    return this.hooks.queuedDeliveries();
  }

  countDeliveries(org: string, month: string): number {
    return this.hooks.countDeliveries(org, month);
  }

  lastDeliveryId(): number {
    return this.hooks.lastDeliveryId();
  }

  deliveryCursors(): Map<string, number> {
    return this.hooks.deliveryCursors();
  }

  isEmpty(): boolean {
    return this.orgsDb.getKeysCount() === 0 && this.keysDb.getKeysCount() === 0;
  }

  async close(): Promise<void> {
    await this.root.close();
  }

  private async durable(): Promise<void> {
    if (this.durability === 'sync') await storeWrite(this.root.flushed);
  }
}

/** The visitor of the scan in progress: lmdb calls the scan handle's decoder once per value. */
let scanVisitor: ((bytes: Buffer, size: number) => void) | null = null;

function scanValue(bytes: Uint8Array, size: number): null {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, size);
  scanVisitor?.(buf, size);
  return null;
}
