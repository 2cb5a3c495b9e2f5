import { join } from 'node:path';
import { afterAll, describe, it } from 'vitest';
import { natsAvailable, startNats, type NatsServers } from './nats.js';
import { ADMIN_KEY, call, removeDir, startServer, tempDir, type TestServer } from './server.js';

/**
 * One suite body, run once per mode (h3's describeMatrix habit): `embedded` (one process, its own
 * LMDB) and `cluster` (DESIGN §8: two nodes joined through a real nats-server).
 *
 * In cluster mode a server set is a fresh nats-server (its own temp store) and two Vigil runtimes
 * in this process, each with its own data dir, so nothing leaks between sets: the ledger stream,
 * the KV buckets (where the bootstrap org `acme` and ADMIN_KEY live) and the leases are
 * cluster-wide. The cluster has one partition, owned by node 2 (started first, and again first on
 * a restart): every write sent to `url` (node 1) goes to node 2's writer over NATS request-reply,
 * and every read sent to `readUrl` (node 2) is answered from node 2's replica of the stream, never
 * from the process that took the HTTP write. Leases are 10 s, so a busy test machine does not
 * move the partition mid-test.
 */
export type Mode = 'embedded' | 'cluster';

export interface ModeServers {
  readonly mode: Mode;
  /** Where writes go: the only node in embedded mode; node 1 (which owns no partition) in cluster mode. */
  readonly url: string;
  /** Where reads go: `url` in embedded mode; node 2 in cluster mode (the owner of every org). */
  readonly readUrl: string;
  /**
   * The node whose writer decides the orgs, and so makes and sends their webhook deliveries
   * (cluster-wide since the VIGIL_WEBHOOKS stream; statements that count deliveries read them
   * here). `url` in embedded mode, `readUrl` in cluster mode.
   */
  readonly ownerUrl: string;
  /** Every running runtime: one in embedded mode, [node 1, node 2] in cluster mode. */
  readonly nodes: readonly TestServer[];
  /** The environment for `keys create` and `orgs set-plan` against these servers (the data dir, or the cluster). */
  readonly cliEnv: Record<string, string>;
  /**
   * Cluster mode: waits until every node knows each of `keys` (KV watches deliver within
   * milliseconds, not at once) and shows the public records each key's org's owner published
   * for its last write (public reads come from the owners' coalesced publishing and trail by up
   * to a flush interval plus the KV's lag), so public reads see every acknowledged write.
   * Embedded mode: nothing to wait for.
   */
  settle(...keys: string[]): Promise<void>;
  /**
   * Cluster mode: polls `ok` (bounded) for a change made outside the nodes (the CLI writes the KV
   * buckets; each node's watch applies it within milliseconds). Embedded mode: `ok` must hold at once.
   */
  eventually(what: string, ok: () => Promise<boolean>): Promise<void>;
  /** A clean stop and start of every node on the same data dirs (and the same nats-server). */
  restart(): Promise<void>;
  /** Stops every node and the nats-server and removes their dirs. Safe to call twice. */
  close(): Promise<void>;
}

export interface ModeContext {
  readonly mode: Mode;
  /** Starts a fresh server set for this mode (`env` as for startServer); closed after the suite if the test did not. */
  start(env?: Record<string, string>): Promise<ModeServers>;
  /**
   * `it` in embedded mode; in cluster mode `it.skip`, the test's name followed by `why`: for a case
   * about one process (its files, a kill -9 of `vigil serve`).
   */
  embeddedOnly(why: string): (name: string, fn: () => Promise<void>, timeout?: number) => void;
}

const MODES: readonly Mode[] = ['embedded', 'cluster'];
let natsChecked: boolean | undefined;

/**
 * `describe(name [mode])` once per mode, `body` given that mode's context. Without nats-server the
 * cluster run is skipped with one loud line (a failure with VIGIL_REQUIRE_NATS=1).
 */
export function describeModes(name: string, body: (m: ModeContext) => void): void {
  for (const mode of MODES) {
    const runs = mode === 'embedded' || (natsChecked ??= natsAvailable('the cluster-mode runs of the HTTP suites'));
    (runs ? describe : describe.skip)(`${name} [${mode}]`, () => {
      const started: ModeServers[] = [];
      const context: ModeContext = {
        mode,
        async start(env = {}) {
          const servers = mode === 'embedded' ? await startEmbedded(env) : await startCluster(env);
          started.push(servers);
          return servers;
        },
        embeddedOnly: (why) => (name, fn, timeout) => {
          if (mode === 'embedded') it(name, fn, timeout);
          else it.skip(`${name} (embedded only: ${why})`, fn, timeout);
        },
      };
      afterAll(async () => {
        for (const servers of started) await servers.close();
      });
      body(context);
    });
  }
}

async function startEmbedded(env: Record<string, string>): Promise<ModeServers> {
  let server = await startServer(env);
  const dir = server.dataDir;
  let closed = false;
  return {
    mode: 'embedded',
    get url() {
      return server.url;
    },
    get readUrl() {
      return server.url;
    },
    get ownerUrl() {
      return server.url;
    },
    get nodes() {
      return [server];
    },
    cliEnv: { VIGIL_DATA_DIR: dir },
    settle: () => Promise.resolve(),
    async eventually(what, ok) {
      if (!(await ok())) throw new Error(`expected at once in embedded mode: ${what}`);
    },
    async restart() {
      await server.close();
      server = await startServer(env, dir);
    },
    async close() {
      if (closed) return;
      closed = true;
      await server.close();
      removeDir(dir);
    },
  };
}

const PARTITIONS = '1';
const LEASE_SECONDS = '10';
const WAIT_MS = 20_000;

async function until(what: string, ok: () => Promise<boolean>, ms = WAIT_MS): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * Waits until every node's public records of the key's org show the owner's view (an owner
 * publishes them every 250 ms): none when no agent is listed, else a list of as many agents whose
 * records name the org's current head (a flush appears whole, so the head tells its length). Read
 * through HTTP on the owner (node 2); a key that may not read the audit export is not checked.
 */
async function publicSettled(nodes: readonly TestServer[], key: string): Promise<void> {
  const owner = nodes[nodes.length - 1]!.url;
  const tail = await call(owner, 'GET', '/audit/export?since_seq=1000000000', { key });
  if (tail.status === 403) return;
  if (tail.status !== 200) throw new Error(`GET /audit/export on ${owner}: ${tail.status} ${tail.text}`);
  const length = Number(tail.headers.get('x-vigil-ledger-head-seq'));
  if (length === 0) return;
  const head = JSON.parse((await call(owner, 'GET', `/audit/export?since_seq=${length - 1}`, { key })).text.trim()).chain_hash as string;
  const org = (await call(owner, 'GET', '/orgs/me', { key })).body.slug as string;
  let listed = 0;
  for (let offset = 0, total = 1; offset < total; offset += 100) {
    const page = (await call(owner, 'GET', `/agents?limit=100&offset=${offset}`, { key })).body as { total: number; agents: { public: boolean; is_active: boolean }[] };
    total = page.total;
    listed += page.agents.filter((a) => a.public && a.is_active).length;
  }
  // The owner first: the other nodes' watches then trail it by milliseconds.
  for (const node of [...nodes].reverse()) {
    await until(`node ${node.url} to show the public records of ${org} at its head`, async () => {
      const res = await call(node.url, 'GET', `/public/agents/${org}?limit=1`, { key: null });
      if (listed === 0) return res.status === 404;
      return res.status === 200 && res.body.total === listed && res.body.agents[0]?.ledger_head === head;
    });
  }
}

async function startCluster(env: Record<string, string>): Promise<ModeServers> {
  const nats: NatsServers = await startNats({ nodes: 1 });
  const dirs = [tempDir('vigil-node1-'), tempDir('vigil-node2-')] as const;
  const cliDir = tempDir('vigil-cli-');
  const nodeEnv = (node: string): Record<string, string> => ({
    ...env,
    VIGIL_NATS_URL: nats.urls.join(','),
    VIGIL_NODE_ID: node,
    VIGIL_PARTITIONS: PARTITIONS,
    VIGIL_LEASE_SECONDS: LEASE_SECONDS,
  });
  let nodes: [TestServer, TestServer] | null = null;
  let closed = false;

  const up = async (): Promise<[TestServer, TestServer]> => {
    // Node 2 first: it takes the one partition, which node 1 (its fair share met) never claims.
    const second = await startServer(nodeEnv('node-2'), dirs[1]);
    let first: TestServer | undefined;
    try {
      await until('node 2 to own the partition', async () => (await call(second.url, 'GET', '/health', { key: null })).body?.partitions_owned?.length === 1);
      first = await startServer(nodeEnv('node-1'), dirs[0]);
      const health = (await call(first.url, 'GET', '/health', { key: null })).body;
      if (health?.mode !== 'cluster' || health.partitions_owned.length !== 0) throw new Error(`node 1 should own nothing: ${JSON.stringify(health)}`);
      return [first, second];
    } catch (error) {
      await first?.close();
      await second.close();
      throw error;
    }
  };
  /** Node 1 first, so node 2's partition is not taken over while it stops. */
  const down = async (): Promise<void> => {
    if (nodes === null) return;
    const [first, second] = nodes;
    nodes = null;
    await first.close();
    await second.close();
  };
  const running = (): [TestServer, TestServer] => {
    if (nodes === null) throw new Error('the cluster is not running');
    return nodes;
  };

  try {
    nodes = await up();
  } catch (error) {
    await nats.stop();
    for (const dir of [...dirs, cliDir]) removeDir(dir);
    throw error;
  }
  return {
    mode: 'cluster',
    get url() {
      return running()[0].url;
    },
    get readUrl() {
      return running()[1].url;
    },
    get ownerUrl() {
      return running()[1].url;
    },
    get nodes() {
      return running();
    },
    // The CLI touches no data dir in cluster mode: one that must never be made.
    cliEnv: { VIGIL_NATS_URL: nats.urls.join(','), VIGIL_DATA_DIR: join(cliDir, 'never') },
    async settle(...keys) {
      for (const key of keys.length === 0 ? [ADMIN_KEY] : keys) {
        for (const node of running()) {
          await until(`node ${node.url} to know a key`, async () => {
            const me = await call(node.url, 'GET', '/orgs/me', { key });
            if (me.status === 401) return false;
            if (me.status !== 200) throw new Error(`GET /orgs/me on ${node.url}: ${me.status} ${me.text}`);
            return true;
          });
        }
        await publicSettled(running(), key);
      }
    },
    eventually: (what, ok) => until(what, ok, 5_000),
    async restart() {
      await down();
      nodes = await up();
    },
    async close() {
      if (closed) return;
      closed = true;
      await down();
      await nats.stop();
      for (const dir of [...dirs, cliDir]) removeDir(dir);
    },
  };
}
