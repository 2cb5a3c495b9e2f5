import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';

/**
 * A node's connection to NATS. Every request of the client (each JetStream publish, each command)
 * captured a stack trace for an error it would rarely throw; a busy node pays that per message,
 * so it is switched off (`noAsyncTraces`). Errors keep their message; the code that logs them
 * says what it was doing.
 */
export function connectNode(options: ConnectionOptions): Promise<NatsConnection> {
  return connect({ ...options, noAsyncTraces: true });
}
