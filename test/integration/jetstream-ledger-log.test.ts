import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { GENESIS_HASH, makeRow, type LedgerRow } from '../../src/domain/ledger.js';
import { JetStreamLedgerLog, type JetStreamLedgerLogOptions } from '../../src/nats/jetstream-ledger-log.js';
import { chain } from '../contract/ledger-log.case.js';
import { captureLogger, silentLogger, type LogLine } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';

/**
 * What JetStreamLedgerLog does beyond the LedgerLog contract (which test/contract runs on it):
 * duplicate acks, the stream it accepts, batch size, and subscriptions across server restarts.
 */
const run = natsAvailable('JetStreamLedgerLog behaviour') ? describe : describe.skip;

let n = 0;
const optionsFor = (replicas = 1): JetStreamLedgerLogOptions => {
  n++;
  return { stream: `LOG_T${n}`, subjectPrefix: `l${n}.ledger`, replicas, log: silentLogger() };
};

/** Another writer's rows for the same seqs: same shape, different content. */
function otherChain(count: number): LedgerRow[] {
  const rows: LedgerRow[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= count; seq++) {
    const row = makeRow(prev, seq, 'event', '2026-11-22T00:00:01.000Z', 'intruder', { seq });
    rows.push(row);
    prev = row.chainHash;
  }
  return rows;
}

async function seqsOf(log: JetStreamLedgerLog, org: string): Promise<number[]> {
  const out: number[] = [];
  for await (const batch of log.read(org, 1)) out.push(...batch.rows.map((r) => r.seq));
  return out;
}

async function messageCount(nc: NatsConnection, stream: string): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(stream)).state.messages;
}

run('JetStreamLedgerLog on one nats-server', () => {
  let servers: NatsServers | undefined;
  let nc: NatsConnection;
  beforeAll(async () => {
    servers = await startNats({ nodes: 1 });
    nc = await connect({ servers: servers.urls });
  });
  afterAll(async () => {
    await nc?.close();
    await servers?.stop();
  });

  it('takes a retried append (same rows, same fence: its ack was lost) as done, and stores it once', async () => {
    const options = optionsFor();
    const log = await JetStreamLedgerLog.open(nc, options);
    const rows = chain(3);
    const first = await log.append('r', rows, 0);
    expect(first).toMatchObject({ ok: true });
    expect(await log.append('r', rows, 0)).toEqual(first);
    expect(await messageCount(nc, options.stream!)).toBe(1);
    expect(await seqsOf(log, 'r')).toEqual([1, 2, 3]);
    await log.close();
  });

  it('refuses a second writer whose batch has the same first seq, though JetStream acks it as a duplicate', async () => {
    const log = await JetStreamLedgerLog.open(nc, optionsFor());
    const mine = await log.append('w', chain(3), 0);
    expect(mine.ok).toBe(true);
    // Same msg id (w:1), so JetStream answers "duplicate" before it looks at the fence.
    expect(await log.append('w', otherChain(3), 0)).toEqual({ ok: false, reason: 'conflict' });
    expect(await log.append('w', otherChain(2), 0)).toEqual({ ok: false, reason: 'conflict' });
    const rows: LedgerRow[] = [];
    for await (const batch of log.read('w', 1)) rows.push(...batch.rows);
    expect(rows.map((r) => r.agentId)).toEqual(['agent', 'agent', 'agent']);
    await log.close();
  });

  it('refuses an identical retry once the org has moved on (the writer is stale)', async () => {
    const log = await JetStreamLedgerLog.open(nc, optionsFor());
    const rows = chain(4);
    const a = await log.append('m', rows.slice(0, 2), 0);
    await log.append('m', rows.slice(2), a.ok ? a.fence : -1);
    expect(await log.append('m', rows.slice(0, 2), 0)).toEqual({ ok: false, reason: 'conflict' });
    expect(await seqsOf(log, 'm')).toEqual([1, 2, 3, 4]);
    await log.close();
  });

  it('reads an org whole through a filtered consumer (readWhole) as read does, past several fetches and other orgs\' batches', async () => {
    const log = await JetStreamLedgerLog.open(nc, optionsFor());
    const rows = chain(2500);
    const noise = chain(5);
    let fence = 0;
    let noiseFence = 0;
    for (const row of rows) {
      const appended = await log.append('whole', [row], fence);
      if (!appended.ok) throw new Error('append refused');
      fence = appended.fence;
      // Another org's batch now and then: the filter skips it.
      if (row.seq % 500 === 0) {
        const o = await log.append('noise', [noise[row.seq / 500 - 1]!], noiseFence);
        if (!o.ok) throw new Error('append refused');
        noiseFence = o.fence;
      }
    }
    const viaGets: { seqs: number[]; fences: number[] } = { seqs: [], fences: [] };
    for await (const b of log.read('whole', 1200)) {
      viaGets.seqs.push(...b.rows.map((r) => r.seq));
      viaGets.fences.push(b.fence);
    }
    const whole: { seqs: number[]; fences: number[] } = { seqs: [], fences: [] };
    for await (const b of log.readWhole('whole', 1200)) {
      whole.seqs.push(...b.rows.map((r) => r.seq));
      whole.fences.push(b.fence);
    }
    expect(whole.seqs).toEqual(Array.from({ length: 1301 }, (_, i) => 1200 + i));
    expect(whole).toEqual(viaGets);
    expect(whole.fences.at(-1)).toBe(fence);
    const none: number[] = [];
    for await (const b of log.readWhole('nobody', 1)) none.push(...b.rows.map((r) => r.seq));
    expect(none).toEqual([]);
  }, 120_000);

  it('cannot foretell a fence, and declares no capability', async () => {
    const log = await JetStreamLedgerLog.open(nc, optionsFor());
    expect(log.capabilities).toEqual([]);
    expect(() => log.fenceAfter(chain(1))).toThrow(/cannot foretell a fence/);
    await log.close();
  });

  it('refuses a row over the server max_payload, writing nothing', async () => {
    const options = optionsFor();
    const log = await JetStreamLedgerLog.open(nc, options);
    const rows = chain(1).map((r) => ({ ...r, bodyJson: JSON.stringify({ pad: 'x'.repeat(1_100_000) }) }));
    await expect(log.append('big', rows, 0)).rejects.toThrow(/over the server's max_payload/);
    expect(await messageCount(nc, options.stream!)).toBe(0);
    await log.close();
  });

  it('splits a batch over max_payload into consecutive messages, fenced in turn, read back whole', async () => {
    const options = optionsFor();
    const log = await JetStreamLedgerLog.open(nc, options);
    // Three rows of ~600 KB: no two fit one 1 MB message.
    const rows = chain(3).map((r) => ({ ...r, bodyJson: JSON.stringify({ pad: 'x'.repeat(600_000) }) }));
    const appended = await log.append('big', rows, 0);
    expect(appended.ok).toBe(true);
    expect(await messageCount(nc, options.stream!)).toBe(3);
    const back: LedgerRow[] = [];
    let fence = 0;
    for await (const batch of log.read('big', 1)) {
      back.push(...batch.rows);
      fence = batch.fence;
    }
    expect(back.map((r) => r.seq)).toEqual([1, 2, 3]);
    expect(appended.ok && appended.fence).toBe(fence);
    // The fence of the last part continues the org; the first part's does not.
    expect((await log.append('big', chain(4).slice(3), fence - 1)).ok).toBe(false);
    expect((await log.append('big', chain(4).slice(3), fence)).ok).toBe(true);
    await log.close();
  });

  it('creates the stream per DESIGN §8, accepts it again, and refuses one that allows deleting messages', async () => {
    const options = optionsFor();
    await (await JetStreamLedgerLog.open(nc, options)).close();
    const jsm = await jetstreamManager(nc);
    const config = (await jsm.streams.info(options.stream!)).config;
    expect(config).toMatchObject({ subjects: [`${options.subjectPrefix}.>`], storage: 'file', num_replicas: 1, deny_delete: true, deny_purge: true });
    await (await JetStreamLedgerLog.open(nc, options)).close();
    const loose = optionsFor();
    await jsm.streams.add({ name: loose.stream!, subjects: [`${loose.subjectPrefix}.>`] });
    await expect(JetStreamLedgerLog.open(nc, loose)).rejects.toThrow(/cannot use/);
  });

  it('keeps a subscription across a kill -9 and restart of the server: every batch once, in order', async () => {
    const lines: LogLine[] = [];
    const log = await JetStreamLedgerLog.connect(servers!.urls, { ...optionsFor(), timeoutMs: 2000, log: captureLogger(lines) });
    const seen: number[] = [];
    await log.subscribe(({ rows }) => seen.push(...rows.map((r) => r.seq)), log.positionAfter(new Map()));
    const rows = chain(30);
    let fence = await appendAll(log, 'k', rows.slice(0, 10), 0);
    await servers!.kill(0);
    const during = appendAll(log, 'k', rows.slice(10, 15), fence);
    await servers!.restart(0);
    fence = await appendAll(log, 'k', rows.slice(15), await during);
    // Well under the 30 s a stalled pull would take to expire (see LedgerFeed).
    await expect.poll(() => seen.length, { timeout: 10_000 }).toBe(30);
    expect(seen).toEqual(rows.map((r) => r.seq));
    expect(lines.map((l) => l.msg)).toContain('ledger subscription renews its consumer');
    await log.close();
  });
});

run('JetStreamLedgerLog on a 3-node cluster (R3)', () => {
  let servers: NatsServers | undefined;
  beforeAll(async () => {
    servers = await startNats({ nodes: 3 });
  });
  afterAll(async () => {
    await servers?.stop();
  });

  it('goes on appending and feeding a subscriber while each server in turn is killed and restarted', async () => {
    const log = await JetStreamLedgerLog.connect(servers!.urls, { ...optionsFor(3), timeoutMs: 2000 });
    const seen: number[] = [];
    await log.subscribe(({ rows }) => seen.push(...rows.map((r) => r.seq)), log.positionAfter(new Map()));
    const rows = chain(40);
    let fence = await appendAll(log, 'c', rows.slice(0, 10), 0);
    for (let i = 0; i < 3; i++) {
      await servers!.kill(i);
      fence = await appendAll(log, 'c', rows.slice(10 + 10 * i, 15 + 10 * i), fence);
      await servers!.restart(i);
      fence = await appendAll(log, 'c', rows.slice(15 + 10 * i, 20 + 10 * i), fence);
    }
    await expect.poll(() => seen.length, { timeout: 10_000 }).toBe(40);
    expect(seen).toEqual(rows.map((r) => r.seq));
    expect(await seqsOf(log, 'c')).toEqual(rows.map((r) => r.seq));
    await log.close();
  });
});

/**
 * Appends rows in batches of 5, each retried as is while the servers cannot answer (an append cut
 * off by a fault has an unknown outcome: the same rows and fence again are safe, see the duplicate
 * rule). A conflict fails at once: nobody else writes this org. Returns the last fence.
 */
async function appendAll(log: JetStreamLedgerLog, org: string, rows: LedgerRow[], fence: number): Promise<number> {
  for (let i = 0; i < rows.length; i += 5) {
    const batch = rows.slice(i, i + 5);
    for (const deadline = Date.now() + 20_000; ; ) {
      const outcome = await log.append(org, batch, fence).catch((error: unknown) => {
        if (Date.now() > deadline) throw error;
        return null;
      });
      if (outcome?.ok === false) throw new Error(`append of ${org} from seq ${batch[0]!.seq} refused: conflict`);
      if (outcome?.ok) {
        fence = outcome.fence;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return fence;
}
