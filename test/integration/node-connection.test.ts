import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNode } from '../../src/nats/node-connection.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';

/** A node's NATS connection: no stack trace captured per request, and requests answered as ever. */
const run = natsAvailable('node connection') ? describe : describe.skip;

run('a node\'s NATS connection', () => {
  let nats: NatsServers;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startNats({ nodes: 1 });
    nc = await connectNode({ servers: nats.urls });
  }, 60_000);
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it('captures no stack trace per request', () => {
    expect((nc as unknown as { options: { noAsyncTraces?: boolean } }).options.noAsyncTraces).toBe(true);
  });

  it('answers requests', async () => {
    const sub = nc.subscribe('coalesce.echo', { callback: (_err, msg) => {
        msg.respond(msg.data);
      },
    });
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => nc.request('coalesce.echo', String(i), { timeout: 5000 })));
    expect(answers.map((a) => a.string())).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
    sub.unsubscribe();
  }, 30_000);
});
