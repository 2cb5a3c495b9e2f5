import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
});
