import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KvFeed } from '../../src/nats/kv-feed.js';
import { StreamFeed } from '../../src/nats/stream-feed.js';
import { captureLogger, type LogLine } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';

/**
 * StreamFeed's watchdog over a real nats-server. The fault it answers (a consumer made while a
 * cluster's server restarts that sends heartbeats and delivers nothing, a node's ledger replica
 * then trailing for good) is not reproducible on demand, so here the feed's first consumer is a
 * real one that delivers nothing with heartbeats going: an ordered consumer of another, empty
 * stream. The feed must notice that the stream holds messages it has not handed over, and replace it.
 */
const run = natsAvailable('StreamFeed') ? describe : describe.skip;

run('StreamFeed (real nats-server)', () => {
  let nats: NatsServers;
  let nc: NatsConnection;
  let js: JetStreamClient;
  let jsm: JetStreamManager;
  beforeAll(async () => {
    nats = await startNats({ nodes: 1 });
    nc = await connect({ servers: nats.urls });
    js = jetstream(nc);
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'FEED', subjects: ['feed.>'] });
    await jsm.streams.add({ name: 'QUIET', subjects: ['quiet.>'] });
  }, 60_000);
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it('replaces a consumer that delivers nothing while the stream holds more, and leaves an idle one be', async () => {
    for (let i = 1; i <= 3; i++) await js.publish('feed.a', new TextEncoder().encode(String(i)));
    let made = 0;
    // The first consumer the feed makes is the silent one; later ones are of the stream asked for.
    const picky = { consumers: { get: (stream: string, options: object) => (made++ === 0 ? js.consumers.get('QUIET', {}) : js.consumers.get(stream, options)) } } as unknown as JetStreamClient;
    const handed: number[] = [];
    const lines: LogLine[] = [];
    const feed = await StreamFeed.open({ js: picky, jsm, stream: 'FEED', name: 'test', startSeq: 1, deliver: (m) => handed.push(m.seq), log: captureLogger(lines), onEnd: () => undefined, stallMs: 300 });
    try {
      // open resolves once the stream's messages at the time are handed over: only by a new consumer.
      expect(handed).toEqual([1, 2, 3]);
      expect(made).toBe(2);
      const renewals = (): LogLine[] => lines.filter((l) => l.msg === 'test subscription renews its consumer');
      expect(renewals()).toHaveLength(1);
      expect(String(renewals()[0]!.fields?.why)).toMatch(/^stalled: the stream holds up to 3, nothing handed over past 0/);
      // Idle for several stall periods: asked, not replaced; then live messages come.
      await new Promise((r) => setTimeout(r, 1500));
      expect(renewals()).toHaveLength(1);
      await js.publish('feed.a', new TextEncoder().encode('4'));
      await expect.poll(() => handed).toEqual([1, 2, 3, 4]);
    } finally {
      await feed.stop();
    }
  });

  it('a KV watch whose first consumer delivers nothing is replaced too, before its initial values are in', async () => {
    const kv = await new Kvm(nc).create('stalled', { history: 1 });
    await kv.put('one', '1');
    await kv.put('two', '2');
    let made = 0;
    const picky = { consumers: { get: (stream: string, options: object) => (made++ === 0 ? js.consumers.get('QUIET', {}) : js.consumers.get(stream, options)) } } as unknown as JetStreamClient;
    const taken: string[] = [];
    const lines: LogLine[] = [];
    // The silent consumer has nothing pending, so the watch takes its initial values as loaded.
    const feed = await KvFeed.open({ nc, js: picky, jsm, stream: 'KV_stalled', subjects: '$KV.stalled.>', take: (m) => taken.push(m.subject), log: captureLogger(lines), stallMs: 300 });
    try {
      await expect.poll(() => taken, { timeout: 5000 }).toEqual(['$KV.stalled.one', '$KV.stalled.two']);
      expect(made).toBe(2);
      expect(lines.filter((l) => l.msg === 'kv watch renews its consumer').map((l) => String(l.fields?.why))).toEqual([expect.stringMatching(/^stalled: the stream holds up to 2, nothing handed over past 0/)]);
    } finally {
      await feed.stop();
    }
  });

  it('keeps replacing a consumer that never delivers, each time after twice the quiet time (a stream tail that cannot be delivered costs a warning a minute at most)', async () => {
    const kv = await new Kvm(nc).create('never', { history: 1 });
    await kv.put('k', 'v');
    const silent = { consumers: { get: () => js.consumers.get('QUIET', {}) } } as unknown as JetStreamClient;
    const lines: LogLine[] = [];
    const feed = await KvFeed.open({ nc, js: silent, jsm, stream: 'KV_never', subjects: '$KV.never.>', take: () => undefined, log: captureLogger(lines), stallMs: 100 });
    try {
      await new Promise((r) => setTimeout(r, 1600));
      // Quiet 0.1 s, 0.2, 0.4, 0.8 (each plus a confirming check): three or four by 1.6 s; without
      // the doubling it would be about ten.
      const renewals = lines.filter((l) => l.msg === 'kv watch renews its consumer').length;
      expect(renewals).toBeGreaterThanOrEqual(2);
      expect(renewals).toBeLessThanOrEqual(5);
    } finally {
      await feed.stop();
    }
  });
});
