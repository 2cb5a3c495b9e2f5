import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Socket } from 'node:net';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNode } from '../../src/nats/node-connection.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';

/**
 * A node's NATS connection writes a turn's messages together (one writev, not one write each),
 * and still delivers every message, in order, and answers requests and flushes.
 */
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

  it('sends a turn\'s 500 messages in one write, every one delivered in order', async () => {
    const received: number[] = [];
    const sub = nc.subscribe('coalesce.test', { max: 500, callback: (_err, msg) => {
        received.push(Number(new TextDecoder().decode(msg.data)));
      },
    });
    await nc.flush();
    // The transport's socket (the client keeps it there): count the writes that reach it.
    const socket = (nc as unknown as { protocol: { transport: { socket: Socket } } }).protocol.transport.socket;
    const writes = { one: 0, many: 0 };
    const streams = socket as unknown as { _write: (...args: unknown[]) => void; _writev: (...args: unknown[]) => void };
    const [write, writev] = [streams._write.bind(socket), streams._writev.bind(socket)];
    streams._write = (...args) => {
      writes.one++;
      write(...args);
    };
    streams._writev = (...args) => {
      writes.many++;
      writev(...args);
    };
    // Each publish queues a microtask flush of its own: 500 writes without the coalescing.
    for (let i = 0; i < 500; i++) {
      nc.publish('coalesce.test', String(i));
      await Promise.resolve();
    }
    await nc.flush();
    await sub.closed;
    expect(received).toEqual(Array.from({ length: 500 }, (_, i) => i));
    // The publishes, then the flush's PING (a turn of its own, or with them).
    expect(writes.one + writes.many).toBeLessThanOrEqual(3);
  }, 30_000);

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
