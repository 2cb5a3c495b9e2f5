import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { NodeTransport } from '@nats-io/transport-node/lib/node_transport.js';
import type { Socket } from 'node:net';

/**
 * A node's connection to NATS. Two costs of the client that a busy node pays per message are
 * switched off:
 * - every request (each JetStream publish, each command) captured a stack trace for an error it
 *   would rarely throw (`noAsyncTraces`);
 * - every microtask that queued a message ended in a socket write of its own: a turn in which the
 *   front end answers a few hundred requests made as many `write` calls, each crossing into the
 *   kernel (on a loopback or a LAN, the kernel's TCP work is charged to the writer). The socket
 *   is corked for the rest of the turn instead, so a turn's messages leave in one `writev`
 *   (`coalesceWrites`). They leave one turn later at most: after this turn's I/O callbacks.
 */
export function connectNode(options: ConnectionOptions): Promise<NatsConnection> {
  coalesceWrites();
  return connect({ ...options, noAsyncTraces: true });
}

let coalescing = false;

/** Corks a NATS socket on its first write of an event-loop turn and uncorks it once the turn's I/O is done. */
function coalesceWrites(): void {
  if (coalescing) return;
  coalescing = true;
  const corked = new WeakSet<Socket>();
  const plain = Object.getOwnPropertyDescriptor(NodeTransport.prototype, 'send')?.value as ((this: NodeTransport, frame: Uint8Array) => void) | undefined;
  if (plain === undefined) return; // another client version: its writes go as they come
  NodeTransport.prototype.send = function (this: NodeTransport, frame: Uint8Array): void {
    const socket = this.socket as Socket | undefined;
    if (socket !== undefined && !corked.has(socket) && !socket.destroyed) {
      corked.add(socket);
      socket.cork();
      setImmediate(() => {
        corked.delete(socket);
        socket.uncork();
      });
    }
    plain.call(this, frame);
  };
}
