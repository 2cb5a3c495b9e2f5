import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on loopback that a test can cut: `blackhole()` stops carrying bytes both ways
 * without closing anything, as a firewall dropping packets would (the peers see silence, their
 * writes back up, and new connections open but carry nothing); `heal()` carries on from where it
 * stopped, so what was sent meanwhile arrives late rather than never, as TCP retransmission would
 * deliver it. Either side closing closes the other.
 */
export interface TcpProxy {
  readonly port: number;
  blackhole(): void;
  heal(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: number, port = 0): Promise<TcpProxy> {
  const pairs = new Set<[Socket, Socket]>();
  let cut = false;
  const server: Server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const end = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
      from.on('data', (chunk) => {
        if (!to.write(chunk)) from.pause();
      });
      to.on('drain', () => {
        if (!cut) from.resume();
      });
      from.on('close', end);
      from.on('error', end);
    }
    if (cut) for (const s of pair) s.pause();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as { port: number }).port,
    blackhole() {
      cut = true;
      for (const pair of pairs) for (const s of pair) s.pause();
    },
    heal() {
      cut = false;
      for (const pair of pairs) for (const s of pair) s.resume();
    },
    async close() {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
