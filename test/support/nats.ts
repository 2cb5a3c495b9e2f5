import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { removeDir, tempDir } from './server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

/** Real nats-server processes on loopback, for the cluster-mode tests. */
export interface NatsServers {
  /** One client URL per node, in node order. */
  readonly urls: string[];
  /** Stops every node (SIGTERM, then SIGKILL past a deadline) and removes their store dirs. */
  stop(): Promise<void>;
  /** kill -9 of node `i`; its store dir and ports are kept for `restart`. */
  kill(i: number): Promise<void>;
  /**
   * Starts node `i` again on its ports and store dir, resolving once it is healthy (`/healthz`:
   * JetStream current with the cluster, so killing another node next leaves a quorum).
   */
  restart(i: number): Promise<void>;
  /** The pid of each running node, in node order (null for a node stopped or killed): for the bench's CPU figures. */
  pids(): (number | null)[];
}

const READY_MS = 30_000;
const STOP_MS = 5_000;

/**
 * The nats-server binary (NATS_SERVER_BIN, else `nats-server` on PATH), or null when there is
 * none. Debian's package is 2.9.10: the config below uses nothing newer (no `sync_interval`).
 */
export function natsServerBin(): string | null {
  const bin = process.env.NATS_SERVER_BIN ?? 'nats-server';
  const probe = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  return probe.status === 0 ? bin : null;
}

/**
 * Whether the cluster tests can run. Without nats-server they are skipped with one loud line;
 * with VIGIL_REQUIRE_NATS=1 (set by .ci/run) the lack throws, so the test file fails.
 */
export function natsAvailable(what: string): boolean {
  if (natsServerBin() !== null) return true;
  const line = `${what} cannot run here: nats-server not found (install Debian's nats-server or set NATS_SERVER_BIN)`;
  if (process.env.VIGIL_REQUIRE_NATS === '1') throw new Error(`${line} (VIGIL_REQUIRE_NATS=1)`);
  console.error(`\n!!! SKIPPED: ${line}\n`);
  return false;
}

/** A nats-server to start from a config of the caller's, which names these loopback ports. */
export interface NatsNodeConfig {
  name: string;
  /** The config file's text (nats.conf syntax, or JSON). */
  text: string;
  /** Client port. */
  port: number;
  /** Monitoring port (`http`), polled for `/healthz`. */
  httpPort: number;
}

interface Node {
  name: string;
  port: number;
  httpPort: number;
  config: string;
  process: ChildProcess | null;
  output: string[];
}

/**
 * Starts `nodes` nats-servers with JetStream on free loopback ports, each with its own temp store
 * dir (and, for 3, a cluster whose routes name every node), and resolves once a stream with the
 * cluster's replica count can be made and every node is healthy. Whatever fails on the way stops
 * what started.
 */
export async function startNats(options: { nodes: 1 | 3 }): Promise<NatsServers> {
  const dir = tempDir('vigil-nats-');
  const ports = await freePorts(options.nodes * 3);
  const layout = Array.from({ length: options.nodes }, (_, i) => {
    const [port, clusterPort, httpPort] = ports.slice(3 * i, 3 * i + 3) as [number, number, number];
    return { name: `n${i}`, port, clusterPort, httpPort };
  });
  return startNatsConfigs(layout.map((node) => ({ ...node, text: configFor(node, layout, dir) })), dir);
}

/**
 * Starts one nats-server per config (each written to a file in `dir`, a temp dir that `stop`
 * removes), and resolves once a stream with one replica per node can be made and every node is
 * healthy. Whatever fails on the way stops what started.
 */
export async function startNatsConfigs(configs: readonly NatsNodeConfig[], dir: string): Promise<NatsServers> {
  const bin = natsServerBin();
  if (bin === null) throw new Error('nats-server not found (install it or set NATS_SERVER_BIN)');
  const nodes: Node[] = configs.map(({ name, port, httpPort }) => ({ name, port, httpPort, config: join(dir, `${name}.conf`), process: null, output: [] }));
  configs.forEach((c, i) => writeFileSync(nodes[i]!.config, c.text));
  const urls = nodes.map((n) => `nats://127.0.0.1:${n.port}`);

  const nodeAt = (i: number): Node => {
    const node = nodes[i];
    if (node === undefined) throw new Error(`no nats node ${i} (there are ${nodes.length})`);
    return node;
  };
  const servers: NatsServers = {
    urls,
    async stop() {
      await Promise.all(nodes.map((n) => stopNode(n, 'SIGTERM')));
      removeDir(dir);
    },
    kill: (i) => stopNode(nodeAt(i), 'SIGKILL'),
    restart: async (i) => {
      await startNode(bin, nodeAt(i));
      await healthy(nodeAt(i));
    },
    pids: () => nodes.map((n) => n.process?.pid ?? null),
  };
  try {
    await Promise.all(nodes.map((n) => startNode(bin, n)));
    await jetStreamReady(urls, nodes.length);
    await Promise.all(nodes.map(healthy));
    return servers;
  } catch (error) {
    await servers.stop();
    throw error;
  }
}

interface Layout {
  name: string;
  port: number;
  clusterPort: number;
  httpPort: number;
}

function configFor(node: Layout, nodes: readonly Layout[], dir: string): string {
  const lines = [
    `server_name: ${node.name}`,
    `listen: "127.0.0.1:${node.port}"`,
    `http: "127.0.0.1:${node.httpPort}"`,
    `jetstream { store_dir: ${JSON.stringify(join(dir, node.name))} }`,
  ];
  if (nodes.length > 1) {
    const routes = nodes.filter((n) => n !== node).map((n) => `"nats-route://127.0.0.1:${n.clusterPort}"`);
    lines.push(`cluster { name: vigil-test, listen: "127.0.0.1:${node.clusterPort}", routes: [${routes.join(', ')}] }`);
  }
  return lines.join('\n') + '\n';
}

/** Live servers, killed if this process exits before their test stopped them. */
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Spawns a node and waits for its "Server is ready" line; a node that exits first fails it. */
function startNode(bin: string, node: Node): Promise<void> {
  if (node.process !== null) return Promise.reject(new Error(`nats node ${node.name} is already running`));
  const child = spawn(bin, ['-c', node.config], { stdio: ['ignore', 'ignore', 'pipe'] });
  node.process = child;
  live.add(child);
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => fail(`not ready in ${READY_MS} ms`), READY_MS);
    const fail = (why: string): void => {
      clearTimeout(timer);
      reject(new Error(`nats node ${node.name} ${why}:\n${node.output.join('\n')}`));
    };
    let partial = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      const lines = (partial + text).split('\n');
      partial = lines.pop()!;
      node.output.push(...lines);
      node.output.splice(0, Math.max(0, node.output.length - 50));
      if (lines.some((line) => line.includes('Server is ready'))) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('error', (error) => fail(`could not start (${String(error)})`));
    child.on('exit', (code, signal) => {
      live.delete(child);
      if (node.process === child) node.process = null;
      fail(`exited (${signal ?? code})`); // no effect once ready
    });
  });
}

async function stopNode(node: Node, signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  const child = node.process;
  if (child === null || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_MS);
  await exited;
  clearTimeout(timer);
}

/**
 * JetStream is ready once a stream with the cluster's replica count can be made (so a meta leader
 * exists and every peer has joined); polled until a deadline.
 */
async function jetStreamReady(urls: string[], replicas: number): Promise<void> {
  const deadline = Date.now() + READY_MS;
  const nc = await connect({ servers: urls, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
  try {
    const jsm = await jetstreamManager(nc, { timeout: 2000, checkAPI: false });
    let last: unknown = null;
    while (Date.now() < deadline) {
      try {
        await jsm.streams.add({ name: 'READY_PROBE', subjects: ['ready.probe'], num_replicas: replicas });
        await jsm.streams.delete('READY_PROBE');
        return;
      } catch (error) {
        last = error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    throw new Error(`JetStream not ready in ${READY_MS} ms: ${String(last)}`);
  } finally {
    await nc.close();
  }
}

/** Polls the node's `/healthz` (JetStream current, every stream and consumer it holds too) until 200. */
async function healthy(node: Node): Promise<void> {
  const deadline = Date.now() + READY_MS;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const answer = await fetch(`http://127.0.0.1:${node.httpPort}/healthz`);
      if (answer.ok) return;
      last = `${answer.status} ${await answer.text()}`;
    } catch (error) {
      last = String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`nats node ${node.name} not healthy in ${READY_MS} ms: ${last}`);
}

/** Ports the kernel hands out free now, all distinct (a small race with other processes remains). */
export async function freePorts(count: number): Promise<number[]> {
  const held = await Promise.all(
    Array.from({ length: count }, () => new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve(server));
    })),
  );
  const ports = held.map((s) => (s.address() as { port: number }).port);
  await Promise.all(held.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

/** A cluster whose route connections a test can cut (see `startNatsCuttable`). */
export interface CuttableNats extends NatsServers {
  /** Server names in node order (`n0`, `n1`, `n2`): what stream info names as leader and replicas. */
  readonly names: string[];
  /** Cuts node `i` off from the other servers (its clients still reach it), as a firewall on its cluster port would. */
  isolate(i: number): void;
  /** Undoes `isolate`: what was sent meanwhile arrives late. */
  heal(i: number): void;
}

/**
 * Three nats-servers whose routes each go through a TCP proxy of this process (one per ordered
 * pair of servers), with `no_advertise` so no server learns another's own cluster port, so a test
 * can cut one server off from its cluster without root or iptables.
 */
export async function startNatsCuttable(): Promise<CuttableNats> {
  const dir = tempDir('vigil-nats-');
  const ports = await freePorts(9);
  const layout = [0, 1, 2].map((i) => {
    const [port, clusterPort, httpPort] = ports.slice(3 * i, 3 * i + 3) as [number, number, number];
    return { name: `n${i}`, port, clusterPort, httpPort };
  });
  // proxies[from][to]: the route `from` dials to reach `to`.
  const proxies: (TcpProxy | null)[][] = [];
  for (const from of layout) proxies.push(await Promise.all(layout.map((to) => (to === from ? Promise.resolve(null) : startTcpProxy(to.clusterPort)))));
  const configs = layout.map((node, i) => {
    const routes = proxies[i]!.filter((p): p is TcpProxy => p !== null).map((p) => `"nats-route://127.0.0.1:${p.port}"`);
    const text = [
      `server_name: ${node.name}`,
      `listen: "127.0.0.1:${node.port}"`,
      `http: "127.0.0.1:${node.httpPort}"`,
      `jetstream { store_dir: ${JSON.stringify(join(dir, node.name))} }`,
      `cluster { name: vigil-test, listen: "127.0.0.1:${node.clusterPort}", no_advertise: true, routes: [${routes.join(', ')}] }`,
    ].join('\n');
    return { ...node, text: text + '\n' };
  });
  const all = proxies.flat().filter((p): p is TcpProxy => p !== null);
  let servers: NatsServers;
  try {
    servers = await startNatsConfigs(configs, dir);
  } catch (error) {
    await Promise.all(all.map((p) => p.close()));
    throw error;
  }
  const touching = (i: number): TcpProxy[] => [...proxies[i]!, ...proxies.map((row) => row[i]!)].filter((p): p is TcpProxy => p !== null);
  return {
    urls: servers.urls,
    names: layout.map((n) => n.name),
    kill: (i) => servers.kill(i),
    restart: (i) => servers.restart(i),
    pids: () => servers.pids(),
    isolate: (i) => touching(i).forEach((p) => p.blackhole()),
    heal: (i) => touching(i).forEach((p) => p.heal()),
    async stop() {
      await servers.stop();
      await Promise.all(all.map((p) => p.close()));
    },
  };
}
