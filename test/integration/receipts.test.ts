import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { verifyReceipt, VigilClient, type Receipt } from '../../src/client/index.js';
import { verifyConsistency, verifyInclusion } from '../../src/domain/merkle-verify.js';
import { noteKey, openNote, parseCheckpoint, parseVerifierKey } from '../../src/domain/signed-note.js';
import { describeModes, type ModeServers } from '../support/modes.js';
import { exportLeafInput, rfcLeafHash, rfcRoot } from '../support/rfc9162.js';
import { ADMIN_KEY, call, parseLines } from '../support/server.js';

// Receipts (DESIGN §10) over real HTTP and WebSocket, in both modes: `Prefer: receipt` on single,
// batch and stream ingest; each receipt checked with the published key, against the exported
// record's bytes, and against an inclusion proof of a later checkpoint.

const event = (i: number) => ({ agent_id: 'a', event_type: 'config_read' as const, payload: { i } });
const hex = (h: string): Buffer => Buffer.from(h, 'hex');

/** The root of the tree of exported records, as an auditor computes it. */
function rootFromRows(rows: any[]): Buffer {
  return rfcRoot(rows.map((r) => exportLeafInput(r)));
}

describeModes('receipts', (m) => {
  let s: ModeServers;
  let vkey: string;

  beforeAll(async () => {
    s = await m.start();
    expect((await call(s.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } })).status).toBe(201);
    vkey = (await call(s.readUrl, 'GET', '/public/log-key', { key: null })).text;
  });
  afterAll(() => s.close());

  /** The exported record at `seq`, as an auditor reads it. */
  async function exported(seq: number): Promise<{ recorded_at: string; leaf: string }> {
    await s.settle(ADMIN_KEY);
    const r = parseLines((await call(s.readUrl, 'GET', `/audit/export?since_seq=${seq - 1}&until_seq=${seq}`)).text)[0];
    const leaf = rfcLeafHash(exportLeafInput(r)).toString('hex');
    return { recorded_at: r.recorded_at, leaf };
  }

  /** A receipt is well formed, signed by the published key, and names the exported record's leaf. */
  async function expectGenuine(receipt: Receipt): Promise<void> {
    expect(Object.keys(receipt)).toEqual(['origin', 'seq', 'leaf_hash', 'recorded_at', 'signature']);
    expect(receipt.origin).toMatch(/^127\.0\.0\.1:\d+\/vigil\/acme$/);
    expect(verifyReceipt(receipt, vkey), 'signed by the published log key').toBe(true);
    expect(verifyReceipt({ ...receipt, seq: receipt.seq + 1 }, vkey), 'a changed field fails').toBe(false);
    const record = await exported(receipt.seq);
    expect(receipt.leaf_hash).toBe(record.leaf);
    expect(receipt.recorded_at).toBe(record.recorded_at);
  }

  it('every node publishes the one log key (cluster nodes share it; the name is the host each is reached at)', async () => {
    const published = parseVerifierKey(vkey)!.publicKey;
    for (const node of s.nodes) expect(parseVerifierKey((await call(node.url, 'GET', '/public/log-key', { key: null })).text)!.publicKey.equals(published)).toBe(true);
  });

  it('POST /events/ with Prefer: receipt answers the result and its signed receipt; without, neither', async () => {
    const res = await call(s.url, 'POST', '/events/', { body: event(1), headers: { prefer: 'respond-async, receipt' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('preference-applied')).toBe('receipt');
    expect(res.body).toMatchObject({ gate_status: expect.any(String), event_id: expect.any(Number) });
    await expectGenuine(res.body.receipt);

    const plain = await call(s.url, 'POST', '/events/', { body: event(2) });
    expect(plain.status).toBe(200);
    expect(plain.body.receipt).toBeUndefined();
    expect(plain.headers.get('preference-applied')).toBeNull();
    for (const prefer of ['receipts', 'return=minimal', '']) {
      const other = await call(s.url, 'POST', '/events/', { body: event(3), headers: { prefer } });
      expect(other.body.receipt, `Prefer: ${prefer}`).toBeUndefined();
    }
  });

  it('a retry with the same Idempotency-Key gets the first event\'s receipt, byte for byte', async () => {
    const send = (prefer?: string) => call(s.url, 'POST', '/events/', { body: event(4), headers: { 'idempotency-key': 'receipt-k1', ...(prefer === undefined ? {} : { prefer }) } });
    const first = await send('receipt');
    const retry = await send('receipt');
    expect(retry.body).toEqual(first.body);
    await expectGenuine(retry.body.receipt);
    // The first without a receipt, a retry asking for one: the record's receipt all the same.
    const plain = await call(s.url, 'POST', '/events/', { body: event(5), headers: { 'idempotency-key': 'receipt-k2' } });
    const late = await call(s.url, 'POST', '/events/', { body: event(5), headers: { 'idempotency-key': 'receipt-k2', prefer: 'receipt' } });
    expect(late.body.event_id).toBe(plain.body.event_id);
    await expectGenuine(late.body.receipt);
  });

  it('POST /events/batch with Prefer: receipt: each accepted event its receipt, in seq order; a refused one its error alone', async () => {
    const events = [event(6), { agent_id: 'a' }, event(7), { ...event(8), idempotency_key: 'dup' }, { ...event(8), idempotency_key: 'dup' }];
    const res = await call(s.url, 'POST', '/events/batch', { body: { events }, headers: { prefer: 'receipt' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('preference-applied')).toBe('receipt');
    const [r0, bad, r2, r3, r4] = res.body.results;
    expect(bad.error.code).toBe('validation_failed');
    expect(bad.receipt).toBeUndefined();
    expect([r2.receipt.seq, r3.receipt.seq]).toEqual([r0.receipt.seq + 1, r0.receipt.seq + 2]);
    expect(r4).toEqual(r3); // the same key twice in one batch: one record, one receipt
    for (const r of [r0, r2, r3]) await expectGenuine(r.receipt);
  });

  it('the stream with Prefer: receipt on the upgrade: every result its receipt; VigilClient asks with `receipts`', async () => {
    const ws = new WebSocket(s.url.replace(/^http/, 'ws') + '/events/stream', [], { headers: { authorization: `Bearer ${ADMIN_KEY}`, prefer: 'receipt' } });
    const frame = new Promise<any>((resolve, reject) => {
      ws.once('message', (data: Buffer) => resolve(JSON.parse(data.toString('utf8'))));
      ws.once('error', reject);
    });
    await new Promise((resolve) => ws.once('open', resolve));
    ws.send(JSON.stringify({ id: 'f1', events: [event(9), event(10)] }));
    const { id, results } = await frame;
    ws.close();
    expect(id).toBe('f1');
    expect(results[1].receipt.seq).toBe(results[0].receipt.seq + 1);
    for (const r of results) await expectGenuine(r.receipt);

    for (const transport of ['websocket', 'http'] as const) {
      const client = new VigilClient({ url: s.url, key: ADMIN_KEY, transport, receipts: true });
      const result = await client.ingest(event(11));
      await client.close();
      await expectGenuine(result.receipt!);
      const quiet = new VigilClient({ url: s.url, key: ADMIN_KEY, transport });
      expect((await quiet.ingest(event(12))).receipt, transport).toBeUndefined();
      await quiet.close();
    }
  });

  it('a receipt\'s leaf is proven in a later checkpoint: the promise kept', async () => {
    const { body } = await call(s.url, 'POST', '/events/', { body: event(13), headers: { prefer: 'receipt' } });
    const receipt: Receipt = body.receipt;
    const key = parseVerifierKey(vkey)!;
    // The owner's tree (in cluster mode every node keeps one; the owner's is the writer's).
    await expect
      .poll(async () => parseCheckpoint(openNote((await call(s.ownerUrl, 'GET', '/audit/checkpoint')).text, key) ?? '')?.size ?? 0, { timeout: 5000, interval: 100 })
      .toBeGreaterThanOrEqual(receipt.seq);
    const proof = (await call(s.ownerUrl, 'GET', `/audit/proof/inclusion?seq=${receipt.seq}`)).body;
    const checkpoint = parseCheckpoint(openNote(proof.checkpoint, key)!)!;
    expect(proof.leaf_hash).toBe(receipt.leaf_hash);
    expect(verifyInclusion(receipt.seq - 1, checkpoint.size, hex(receipt.leaf_hash), proof.hashes.map(hex), checkpoint.root)).toBe(true);
  });

  it('every node keeps the same log: a checkpoint of one node is a prefix of another\'s, proven by its consistency proof', async () => {
    await s.settle(ADMIN_KEY);
    const key = parseVerifierKey(vkey)!.publicKey;
    // Each node signs under its own host name here (a real cluster's nodes share one base URL).
    const checkpointOf = async (url: string) => {
      const text = (await call(url, 'GET', '/audit/checkpoint')).text;
      const name = text.split('\n')[0]!.replace(/\/acme$/, '');
      return parseCheckpoint(openNote(text, noteKey(name, key)) ?? '')!;
    };
    const size = (await call(s.ownerUrl, 'GET', '/audit/export')).text.trim().split('\n').length;
    const all = await Promise.all(
      s.nodes.map(async (node) => {
        let checkpoint = await checkpointOf(node.url);
        await expect.poll(async () => (checkpoint = await checkpointOf(node.url)).size, { timeout: 5000, interval: 100 }).toBe(size);
        return checkpoint;
      }),
    );
    for (const c of all) expect(c.root.equals(all[0]!.root)).toBe(true);
    // The log as it was 3 records ago, proven a prefix of the last node's latest.
    const proof = (await call(s.nodes.at(-1)!.url, 'GET', `/audit/proof/consistency?from=${size - 3}&to=${size}`)).body;
    const exported = parseLines((await call(s.ownerUrl, 'GET', '/audit/export')).text);
    const fromRoot = rootFromRows(exported.slice(0, size - 3));
    expect(verifyConsistency(size - 3, size, fromRoot, all.at(-1)!.root, proof.hashes.map(hex))).toBe(true);
  });
});
