import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { GENESIS_HASH, makeRow } from '../../src/domain/ledger.js';
import { JetStreamLedgerLog } from '../../src/nats/jetstream-ledger-log.js';
import { silentLogger } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';

/**
 * nats-server 2.9.x does not check `Nats-Expected-Last-Subject-Sequence` atomically on a
 * replicated stream (nats-server#4320): two concurrent publishes presenting the same sequence can
 * both be stored. Two ledger writers at the same fence write the same first seq, so the same
 * `Nats-Msg-Id`, and the duplicate check keeps one: this checks that on a 3-node cluster (R3),
 * each writer on its own server, so a second writer at the same fence can never fork a chain.
 */
async function until(ok: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + 30_000;
  while (!(await ok().catch(() => false))) {
    if (Date.now() > end) throw new Error('the stream took no append within 30 s');
    await new Promise((r) => setTimeout(r, 200));
  }
}

const run = natsAvailable('the ledger fence on a replicated stream') ? describe : describe.skip;

run('two ledger writers at the same fence on a 3-node cluster (R3)', () => {
  let nats: NatsServers;
  let conns: NatsConnection[] = [];

  beforeAll(async () => {
    nats = await startNats({ nodes: 3 });
    conns = await Promise.all([connect({ servers: [nats.urls[0]!] }), connect({ servers: [nats.urls[1]!] })]);
  }, 60_000);

  afterAll(async () => {
    for (const nc of conns) await nc.close();
    await nats?.stop();
  });

  it('never both acknowledged, never two batches for one seq (40 rounds)', async () => {
    const options = { log: silentLogger(), replicas: 3, stream: 'FENCE_R3', subjectPrefix: 'fence.ledger' };
    const [a, b] = await Promise.all(conns.map((nc) => JetStreamLedgerLog.open(nc, options)));
    // A freshly created R3 stream may time out its first publishes while its leader is elected.
    await until(async () => (await a!.append('warm-up', [makeRow(GENESIS_HASH, 1, 'event', '2026-11-24T00:00:00.000Z', 'a', {})], 0)).ok);
    let decided = 0;
    for (let round = 0; round < 40; round++) {
      const org = `org${round}`;
      const mine = makeRow(GENESIS_HASH, 1, 'event', '2026-11-24T00:00:00.000Z', 'a', { writer: 'a' });
      const theirs = makeRow(GENESIS_HASH, 1, 'event', '2026-11-24T00:00:00.000Z', 'b', { writer: 'b' });
      const settled = await Promise.allSettled([a!.append(org, [mine], 0), b!.append(org, [theirs], 0)]);
      // An append that threw (a timeout) has an unknown outcome; none may be a second "ok".
      const ok = settled.map((s) => s.status === 'fulfilled' && s.value.ok);
      expect(ok.filter(Boolean).length, `round ${round}: ${JSON.stringify(settled.map((s) => s.status))}`).toBeLessThanOrEqual(1);
      const stored = [];
      for await (const batch of a!.read(org, 1)) stored.push(...batch.rows);
      expect(stored.map((r) => r.seq), `round ${round}`).toEqual(stored.length === 0 ? [] : [1]);
      if (ok.includes(true)) {
        decided++;
        // The one stored is the one acknowledged.
        expect(stored[0]?.agentId).toBe(ok[0] ? 'a' : 'b');
      }
    }
    // Nearly every round has a winner; a round lost to timeouts is not a fork, but rare.
    expect(decided).toBeGreaterThanOrEqual(35);
    await Promise.all([a!.close(), b!.close()]);
  }, 90_000);
});
