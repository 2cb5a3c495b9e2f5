/**
 * The stream bench's peer, run as its own process (`node --import tsx bench/jetstream-load.ts
 * <json>`): the same events appended to a JetStream stream (file storage, R1) on a local
 * nats-server, one async-published message each, `connections` connections each keeping `window`
 * publishes unacknowledged, for `seconds` after `warmup` seconds. An append-only log in Go that
 * neither scores nor hashes. Prints one JSON line: acknowledged messages/s and this process's CPU.
 */
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { childMain, measureWindow } from './child-main.js';

export interface JetStreamLoadSpec {
  servers: string[];
  stream: string;
  connections: number;
  window: number;
  seconds: number;
  warmup: number;
  event: Record<string, unknown>;
}

export interface JetStreamLoadResult {
  messages: number;
  messagesPerSec: number;
  errors: number;
  cpuSeconds: number;
  seconds: number;
}

async function main(spec: JetStreamLoadSpec): Promise<JetStreamLoadResult> {
  const admin = await connect({ servers: spec.servers });
  const jsm = await jetstreamManager(admin);
  await jsm.streams.add({ name: spec.stream, subjects: [`${spec.stream.toLowerCase()}.>`], storage: 'file', num_replicas: 1 });
  const connections = await Promise.all(Array.from({ length: spec.connections }, () => connect({ servers: spec.servers })));
  let measuring = false;
  let stopping = false;
  let messages = 0;
  let errors = 0;
  let serial = 0;
  const subject = `${spec.stream.toLowerCase()}.events`;

  const loops = connections.map(async (nc) => {
    const js: JetStreamClient = jetstream(nc);
    const one = async (): Promise<void> => {
      while (!stopping) {
        const data = JSON.stringify({ ...spec.event, idempotency_key: `k${++serial}` });
        try {
          await js.publish(subject, data);
          if (measuring) messages++;
        } catch {
          if (measuring) errors++;
        }
      }
    };
    await Promise.all(Array.from({ length: spec.window }, one));
  });

  const { seconds, cpuSeconds } = await measureWindow(spec.warmup, spec.seconds, (on) => (measuring = on));
  stopping = true;
  await Promise.all(loops);
  await jsm.streams.delete(spec.stream);
  await Promise.all([...connections, admin].map((nc) => nc.close()));
  return { messages, messagesPerSec: Math.round(messages / seconds), errors, cpuSeconds, seconds };
}

childMain(main);
