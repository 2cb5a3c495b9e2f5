import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { LedgerRow } from '../../src/domain/ledger.js';
import { JetStreamLedgerLog } from '../../src/nats/jetstream-ledger-log.js';
import { LedgerReplica } from '../../src/nats/ledger-replica.js';
import { encodeBatches } from '../../src/nats/batch-codec.js';
import { EarlierLayoutError } from '../../src/nats/ledger-migration.js';
import { partitionOf } from '../../src/nats/partition.js';
import { openLmdb } from '../../src/store/lmdb.js';
import type { LmdbLedger } from '../../src/store/lmdb-ledger.js';
import { LmdbLedgerLog } from '../../src/store/lmdb-ledger-log.js';
import { chain } from '../contract/ledger-log.case.js';
import { silentLogger } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';
import { removeDir, tempDir } from '../support/server.js';

/**
 * Partition-scoped copies (cluster mode): a node holds the partitions it owns, read from the
 * stream when gained and fed by its own writers' acknowledged appends after that; nothing else
 * lands in its copy unless asked for. A partition moving between nodes loses and repeats nothing.
 */
const run = natsAvailable('partition-scoped replicas') ? describe : describe.skip;
const PARTITIONS = 4;

run('partition-scoped ledger copies', () => {
  let nats: NatsServers;
  let nc: NatsConnection;
  const dirs: string[] = [];
  const closing: (() => Promise<unknown>)[] = [];
  let n = 0;

  beforeAll(async () => {
    nats = await startNats({ nodes: 1 });
    nc = await connect({ servers: nats.urls });
  }, 60_000);
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
    for (const dir of dirs) removeDir(dir);
  });

  /** A stream of its own (tests do not meet), over PARTITIONS partitions. */
  async function freshStream(): Promise<JetStreamLedgerLog> {
    n++;
    const stream = await JetStreamLedgerLog.open(nc, { stream: `PART_T${n}`, subjectPrefix: `p${n}.ledger`, partitions: PARTITIONS, log: silentLogger() });
    closing.push(() => stream.close());
    return stream;
  }

  interface Copy {
    replica: LedgerReplica;
    ledger: LmdbLedger;
    /** The saved watermark of a partition (what a restart reads on from). */
    saved: (partition: number) => Promise<number | undefined>;
    dir: string;
    /** Saves the watermarks and closes, as a node stopping does. */
    close: () => Promise<void>;
  }

  /** A node's copy on its data dir (a new one unless given: a restarted node's). */
  async function nodeCopy(stream: JetStreamLedgerLog, dir = tempDir('vigil-part-'), secondReadMs = 0): Promise<Copy> {
    if (!dirs.includes(dir)) dirs.push(dir);
    const store = openLmdb(dir, 'process');
    const local = new LmdbLedgerLog(store.ledger, silentLogger());
    const replica = await LedgerReplica.start(nc, stream, local, store.ledger, { meta: store.env.table<string, number>('replica'), log: silentLogger(), waitMs: 2000, secondReadMs });
    replica.ownedBy(() => true);
    let closed = false;
    const close = async (): Promise<void> => {
      if (closed) return;
      closed = true;
      await replica.saveWatermark();
      await replica.close();
      await local.close();
      await store.close();
    };
    closing.push(close);
    const saved = async (partition: number): Promise<number | undefined> => {
      await replica.saveWatermark();
      return store.env.table<string, number>('replica').get(`partition:${partition}`);
    };
    return { replica, ledger: store.ledger, saved, dir, close };
  }

  /** Two orgs in different partitions. */
  function twoOrgs(): [string, string] {
    const first = 'org-a';
    for (let i = 0; ; i++) {
      const other = `org-b${i}`;
      if (partitionOf(other, PARTITIONS) !== partitionOf(first, PARTITIONS)) return [first, other];
    }
  }

  /** Appends `count` rows after `rows` as a writer does: to the stream, then to its own copy. */
  async function write(stream: JetStreamLedgerLog, org: string, rows: LedgerRow[], fence: number, count: number, own?: LedgerReplica): Promise<{ rows: LedgerRow[]; fence: number }> {
    const next = chain(count, rows.at(-1));
    const outcome = await stream.append(org, next, fence);
    if (!outcome.ok) throw new Error(`append refused: ${outcome.reason}`);
    own?.applyOwn(org, next, outcome.fence);
    return { rows: [...rows, ...next], fence: outcome.fence };
  }

  const hashes = (ledger: LmdbLedger, org: string): string[] => [...ledger.range(org, 1, 1_000_000)].map((r) => Buffer.from(r.chainHash).toString('hex'));
  const expected = (rows: LedgerRow[]): string[] => rows.map((r) => Buffer.from(r.chainHash).toString('hex'));

  it('reads a gained partition from the stream, and nothing of the partitions it does not follow', async () => {
    const stream = await freshStream();
    const [mine, theirs] = twoOrgs();
    let a = { rows: [] as LedgerRow[], fence: 0 };
    let b = { rows: [] as LedgerRow[], fence: 0 };
    for (let i = 0; i < 5; i++) {
      a = await write(stream, mine, a.rows, a.fence, 3);
      b = await write(stream, theirs, b.rows, b.fence, 2);
    }
    const { replica, ledger } = await nodeCopy(stream);
    replica.partitions.follow([partitionOf(mine, PARTITIONS)]);
    await replica.partitions.firstRead(partitionOf(mine, PARTITIONS));
    expect(replica.partitions.hasRead(partitionOf(mine, PARTITIONS))).toBe(true);
    expect(hashes(ledger, mine)).toEqual(expected(a.rows));
    expect(ledger.last(theirs)).toBeUndefined();
    // Its own appends land without any read of the stream; the other org only when asked for.
    a = await write(stream, mine, a.rows, a.fence, 4, replica);
    await replica.caughtUp(mine);
    expect(hashes(ledger, mine)).toEqual(expected(a.rows));
    expect(ledger.last(theirs)).toBeUndefined();
    await replica.caughtUp(theirs);
    expect(hashes(ledger, theirs)).toEqual(expected(b.rows));
    expect(await replica.lag()).toBe(0);
  }, 60_000);

  /** Until the partition's second read has ended. */
  async function settledOn(copy: Copy, partition: number): Promise<void> {
    for (const deadline = Date.now() + 10_000; !copy.replica.partitions.settled(partition); ) {
      if (Date.now() > deadline) throw new Error(`partition ${partition} never settled`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it('reads a gained partition a second time: a batch the previous owner appended after the first read is held, unasked', async () => {
    const stream = await freshStream();
    const [org, other] = twoOrgs();
    const partition = partitionOf(org, PARTITIONS);
    let a = await write(stream, org, [], 0, 3);
    const copy = await nodeCopy(stream, undefined, 400);
    copy.replica.partitions.follow([partition]);
    await copy.replica.partitions.firstRead(partition);
    expect(hashes(copy.ledger, org)).toEqual(expected(a.rows));
    // The previous owner's last append, stored after the first read.
    a = await write(stream, org, a.rows, a.fence, 2);
    await settledOn(copy, partition);
    expect(hashes(copy.ledger, org)).toEqual(expected(a.rows));
    expect(copy.ledger.last(other)).toBeUndefined();
  }, 60_000);

  it('moves a partition\'s watermark with its own appends only while it holds the lease', async () => {
    const stream = await freshStream();
    const [org] = twoOrgs();
    const partition = partitionOf(org, PARTITIONS);
    const copy = await nodeCopy(stream);
    let owned = true;
    copy.replica.ownedBy(() => owned);
    copy.replica.partitions.follow([partition]);
    await settledOn(copy, partition);
    let a = await write(stream, org, [], 0, 2, copy.replica);
    await copy.replica.caughtUp(org);
    expect(await copy.saved(partition)).toBe(a.fence);
    // Its lease ran out (a paused process): what it still appends does not move the watermark,
    // since another node may have written the partition after the new owner took it.
    owned = false;
    const before = a.fence;
    a = await write(stream, org, a.rows, a.fence, 2, copy.replica);
    await copy.replica.caughtUp(org);
    expect(await copy.saved(partition)).toBe(before);
  }, 60_000);

  it('a partition lost and gained again while its read runs: one read goes on, every row held once, no lag left', async () => {
    const stream = await freshStream();
    const [org] = twoOrgs();
    const partition = partitionOf(org, PARTITIONS);
    // Enough batches for several fetches of the read.
    let a = { rows: [] as LedgerRow[], fence: 0 };
    for (let i = 0; i < 2500; i++) a = await write(stream, org, a.rows, a.fence, 1);
    const copy = await nodeCopy(stream);
    copy.replica.partitions.follow([partition]);
    copy.replica.partitions.unfollow([partition]);
    copy.replica.partitions.follow([partition]);
    await copy.replica.partitions.firstRead(partition);
    expect(copy.replica.partitions.hasRead(partition)).toBe(true);
    expect(hashes(copy.ledger, org)).toEqual(expected(a.rows));
    await settledOn(copy, partition);
    expect(await copy.replica.lag()).toBe(0);
  }, 90_000);

  it('hands a partition over and back: each copy ends with every row once, in order, read from where it left off', async () => {
    const stream = await freshStream();
    const [org] = twoOrgs();
    const partition = partitionOf(org, PARTITIONS);
    const first = await nodeCopy(stream);
    const second = await nodeCopy(stream);
    first.replica.partitions.follow([partition]);
    await first.replica.partitions.firstRead(partition);
    // Its second read (at once here): own appends move the watermark after it.
    for (const deadline = Date.now() + 10_000; !first.replica.partitions.settled(partition) && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 20));
    let a = { rows: [] as LedgerRow[], fence: 0 };
    for (let i = 0; i < 10; i++) a = await write(stream, org, a.rows, a.fence, 5, first.replica);
    await first.replica.caughtUp(org);
    // The partition moves: the first node stops, the second reads it and writes on.
    first.replica.partitions.unfollow([partition]);
    second.replica.partitions.follow([partition]);
    await second.replica.partitions.firstRead(partition);
    expect(hashes(second.ledger, org)).toEqual(expected(a.rows));
    for (let i = 0; i < 10; i++) a = await write(stream, org, a.rows, a.fence, 5, second.replica);
    await second.replica.caughtUp(org);
    expect(hashes(second.ledger, org)).toEqual(expected(a.rows));
    // And back, over a restart of the first node: read on from its saved watermark.
    await first.close();
    const saved = openLmdb(first.dir, 'process');
    expect(saved.env.table<string, number>('replica').get(`partition:${partition}`)).toBeGreaterThan(0);
    await saved.close();
    second.replica.partitions.unfollow([partition]);
    const reopened = await nodeCopy(stream, first.dir);
    reopened.replica.partitions.follow([partition]);
    await reopened.replica.partitions.firstRead(partition);
    expect(hashes(reopened.ledger, org)).toEqual(expected(a.rows));
  }, 60_000);

  it('moves a ledger stream of the earlier layout (no partition in its subjects) onto partitioned subjects, once, with nodes starting together', async () => {
    const jsm = await jetstreamManager(nc);
    const js = jetstream(nc);
    n++;
    const names = { stream: `OLD_T${n}`, subjectPrefix: `o${n}.ledger`, partitions: PARTITIONS };
    await jsm.streams.add({ name: names.stream, subjects: [`${names.subjectPrefix}.>`], deny_delete: true, deny_purge: true });
    // Two orgs written as the earlier version did: `<prefix>.<org>`, each batch fenced on the one before.
    const written = new Map<string, LedgerRow[]>();
    for (const org of twoOrgs()) {
      let rows: LedgerRow[] = [];
      let fence = 0;
      for (let i = 0; i < 30; i++) {
        const next = chain(1 + (i % 3), rows.at(-1));
        for (const { first, payload } of encodeBatches(next, 1 << 20)) {
          fence = (await js.publish(`${names.subjectPrefix}.${org}`, payload, { msgID: `${org}:${first}`, expect: { lastSubjectSequence: fence } })).seq;
        }
        rows = [...rows, ...next];
      }
      written.set(org, rows);
    }
    // Two nodes start on it at once: both copy, the fence keeps each batch once.
    const other = await connect({ servers: nats.urls });
    closing.push(() => other.close());
    const [a, b] = await Promise.all([nc, other].map((conn) => JetStreamLedgerLog.open(conn, { ...names, log: silentLogger() })));
    closing.push(() => a!.close(), () => b!.close());
    for (const [org, rows] of written) {
      const batches = [];
      for await (const batch of a!.read(org, 1)) batches.push(batch);
      expect(batches.flatMap((batch) => batch.rows.map((r) => Buffer.from(r.chainHash).toString('hex')))).toEqual(expected(rows));
      // The org's writer goes on from the new subject's fence.
      const more = chain(2, rows.at(-1));
      expect(await a!.append(org, more, batches.at(-1)!.fence)).toMatchObject({ ok: true });
      // And a node that gains the partition reads it from the new subjects.
      const copy = await nodeCopy(a!);
      copy.replica.partitions.follow([partitionOf(org, PARTITIONS)]);
      await copy.replica.partitions.firstRead(partitionOf(org, PARTITIONS));
      expect(hashes(copy.ledger, org)).toEqual(expected([...rows, ...more]));
    }
    // Done once: a later start finds the marker and copies nothing.
    const info = await jsm.streams.info(names.stream);
    await (await JetStreamLedgerLog.open(nc, { ...names, log: silentLogger() })).close();
    expect((await jsm.streams.info(names.stream)).state.last_seq).toBe(info.state.last_seq);
    // A node of the earlier version left running writes the old subjects: the next start refuses.
    await js.publish(`${names.subjectPrefix}.late`, encodeBatches(chain(1), 1 << 20)[0]!.payload);
    await expect(JetStreamLedgerLog.open(nc, { ...names, log: silentLogger() })).rejects.toThrow(EarlierLayoutError);
  }, 60_000);
});
