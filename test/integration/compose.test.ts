import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTargets, runTargets, TARGET_AGENT } from '../../bench/targets.js';
import { addressOf, benchArgs, environmentOf, localNatsConfigs, localVigilEnv, natsConfigOf, natsServices, readCompose, vigilServices } from '../support/compose.js';
import { confBlock, confText } from '../support/nats-conf.js';
import { natsAvailable, startNatsConfigs, type NatsServers } from '../support/nats.js';
import { call, removeDir, spawnServer, tempDir, type ServerProcess } from '../support/server.js';

/**
 * docker-compose.yml's topology started from the file as local processes, since no Docker engine
 * runs here: its NATS configs (rewritten to loopback ports and temp stores, see localNatsConfigs)
 * for three nats-servers, and its Vigil services' environments for two real `vigil serve`
 * processes. test/unit/compose-file.test.ts checks the file itself.
 */
const run = natsAvailable('the docker-compose.yml topology as local processes') ? describe : describe.skip;

const PARTITIONS = 64;
const POLL_MS = 20_000;

interface Node {
  name: string;
  id: string;
  dataDir: string;
  server: ServerProcess;
}

run('docker-compose.yml as local processes (nats-server ×3, vigil serve ×2)', () => {
  const { file } = readCompose();
  let nats: NatsServers | undefined;
  let addresses = new Map<string, string>();
  const nodes: Node[] = [];

  beforeAll(async () => {
    const dir = tempDir('vigil-compose-nats-');
    const local = await localNatsConfigs(file, dir);
    addresses = local.addresses;
    nats = await startNatsConfigs(local.configs, dir);
  }, 40_000);

  afterAll(async () => {
    await Promise.all(nodes.map(({ server }) => stop(server)));
    for (const node of nodes) removeDir(node.dataDir);
    await nats?.stop();
  });

  it('forms the one JetStream cluster the NATS configs describe, each server under its configured name', async () => {
    for (const name of natsServices(file)) {
      const conf = natsConfigOf(file, name);
      const monitor = addresses.get(`${name}:${addressOf(confText(conf, 'http')).port}`);
      const varz = (await (await fetch(`http://${monitor}/varz`)).json()) as { server_name: string; cluster: { name: string } };
      expect(varz.server_name).toBe(conf.server_name);
      expect(varz.cluster.name).toBe(confText(confBlock(conf, 'cluster'), 'name'));
      const routez = (await (await fetch(`http://${monitor}/routez`)).json()) as { num_routes: number };
      expect(routez.num_routes, `${name} is routed to the two others`).toBe(2);
    }
  });

  it('runs both nodes in cluster mode: the partitions shared, each owned once; a write on one read on the other; the bench against both', async () => {
    const names = vigilServices(file);
    const started = await Promise.allSettled(
      names.map(async (name) => {
        const s = file.services[name]!;
        const dataDir = tempDir(`vigil-compose-${name}-`);
        const env = localVigilEnv(s, addresses, dataDir);
        nodes.push({ name, id: env.VIGIL_NODE_ID!, dataDir, server: await spawnServer(dataDir, env) });
      }),
    );
    for (const result of started) if (result.status === 'rejected') throw result.reason;
    nodes.sort((a, b) => names.indexOf(a.name) - names.indexOf(b.name));

    // Each node says it is in cluster mode, under its VIGIL_NODE_ID; together they own every
    // partition once, and each a share (a node that joins takes its share from the first).
    const health = await pollUntil(
      async () => Promise.all(nodes.map(async (n) => (await call(n.server.url, 'GET', '/health', { key: null })).body)),
      (answers) => {
        const owned = answers.flatMap((a) => (Array.isArray(a?.partitions_owned) ? (a.partitions_owned as number[]) : []));
        const shared = answers.every((a) => a?.mode === 'cluster' && Array.isArray(a.partitions_owned) && a.partitions_owned.length > 0);
        return shared && owned.length === PARTITIONS && new Set(owned).size === PARTITIONS;
      },
    );
    expect(health.map((h) => h.node)).toEqual(nodes.map((n) => n.id));
    const owned = health.flatMap((h) => h.partitions_owned as number[]).sort((a, b) => a - b);
    expect(owned).toEqual(Array.from({ length: PARTITIONS }, (_, i) => i));

    // The bootstrap key is the file's (VIGIL_ADMIN_KEY unset: its default), the same on both nodes.
    const [one, two] = nodes as [Node, Node];
    const key = environmentOf(file.services[one.name]!).VIGIL_BOOTSTRAP_KEY!;
    expect((await call(one.server.url, 'POST', '/agents', { key, body: { agent_id: 'compose-agent', name: 'Compose Agent' } })).status).toBe(201);
    const event = { agent_id: 'compose-agent', event_type: 'output_generated', payload: {}, dti: 0.2 };
    expect((await call(one.server.url, 'POST', '/events', { key, body: event })).status).toBe(200);
    const read = await call(two.server.url, 'GET', '/agents/compose-agent', { key });
    expect(read.status).toBe(200);
    expect(read.body.ledger_records).toBe(2);

    // The bench service's own arguments, its targets moved to the local nodes; a short run.
    const local = new Map(nodes.map((n) => [`http://${n.name}:${environmentOf(file.services[n.name]!).VIGIL_PORT}`, n.server.url]));
    const urls = (parseTargets(benchArgs(file.services.bench!)) ?? []).map((u) => local.get(u) ?? u);
    expect(urls).toEqual(nodes.map((n) => n.server.url));
    const rows = await runTargets({ urls, key: environmentOf(file.services.bench!).VIGIL_BENCH_KEY!, rounds: 1, seconds: 1, warmupSeconds: 0, connections: 4, log: () => {} });
    expect(rows.map((r) => [r.scenario, r.target, r.errors])).toEqual([
      ['POST /events/', urls[0], 0],
      ['POST /events/', urls[1], 0],
      ['GET /agents/{id}', urls[0], 0],
      ['GET /agents/{id}', urls[1], 0],
    ]);
    // Every event the load generator counted is in the ledger, read from either node.
    const posted = rows.filter((r) => r.scenario.startsWith('POST')).reduce((sum, r) => sum + r.requests, 0);
    expect(posted).toBeGreaterThan(0);
    for (const node of nodes) {
      const agent = await call(node.server.url, 'GET', `/agents/${TARGET_AGENT}`, { key });
      expect(agent.body.ledger_records).toBeGreaterThanOrEqual(1 + posted);
    }
  }, 60_000);
});

/** Polls `read` until `done` holds, then returns what it read; past the deadline, fails with the last reading. */
async function pollUntil<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + POLL_MS;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await read();
    if (done(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`not reached in ${POLL_MS} ms; last: ${JSON.stringify(last)}`);
}

/** SIGTERM (a clean stop), SIGKILL if it is still running 5 s later. */
async function stop(server: ServerProcess): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill('SIGTERM');
  const timer = setTimeout(() => server.child.kill('SIGKILL'), 5_000);
  await server.exited;
  clearTimeout(timer);
}
