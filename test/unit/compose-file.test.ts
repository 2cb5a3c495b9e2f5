import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseTargets } from '../../bench/targets.js';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.js';
import {
  addressOf,
  benchArgs,
  environmentOf,
  interpolate,
  mountsOf,
  natsConfigOf,
  publishedPorts,
  readCompose,
  type ComposeService,
} from '../support/compose.js';
import { confBlock, confText, type NatsConf } from '../support/nats-conf.js';
import { natsAvailable, natsServerBin } from '../support/nats.js';
import { ROOT, tempDir } from '../support/server.js';

/** docker-compose.yml, read as Compose reads it; no Docker engine runs here (see test/integration/compose.test.ts). */
const { keys, file } = readCompose();
const NATS = ['nats-1', 'nats-2', 'nats-3'];
const NODES = ['vigil-1', 'vigil-2'];
const svc = (name: string): ComposeService => {
  const s = file.services[name];
  if (s === undefined) throw new Error(`no service ${name}`);
  return s;
};
const conf = (name: string): NatsConf => natsConfigOf(file, name);
/** The Node services (the two nodes and the bench) all mount the repository and install into volumes. */
const NODE_IMAGE = /^node:20(-[a-z]+)?$/;

describe('docker-compose.yml', () => {
  it('declares exactly the NATS servers, the Vigil nodes and the bench, and only the bench is behind a profile', () => {
    expect(keys.filter((k) => !k.startsWith('x-')).sort()).toEqual(['configs', 'services', 'volumes']);
    expect(Object.keys(file.services).sort()).toEqual(['bench', ...NATS, ...NODES]);
    expect(svc('bench').profiles).toEqual(['bench']);
    for (const name of [...NATS, ...NODES]) expect(svc(name).profiles, name).toBeUndefined();
  });

  it('clusters three JetStream servers, each fsyncing before it acknowledges, each with its own store volume', () => {
    const names = NATS.map((n) => conf(n).server_name);
    expect(new Set(names).size).toBe(3);
    expect(new Set(NATS.map((n) => confBlock(conf(n), 'cluster').name)).size).toBe(1);
    for (const name of NATS) {
      const s = svc(name);
      // sync_interval needs a current NATS: 2.12 or later.
      expect(s.image).toMatch(/^nats:2\.(1[2-9]|[2-9]\d)(\.\d+)?(-alpine)?$/);
      expect(s.command?.[0]).toBe('-c');
      const c = conf(name);
      expect(confBlock(c, 'jetstream').sync_interval, name).toBe('always');
      const store = mountsOf(s).find((m) => confText(confBlock(c, 'jetstream'), 'store_dir').startsWith(m.target));
      expect(store?.named, `${name} keeps its store on a named volume`).toBe(true);
      expect(file.volumes).toHaveProperty(store!.source);
      // Routes name every server of the cluster at its cluster port (a route to itself is ignored).
      const routes = (confBlock(c, 'cluster').routes as string[]).map((r) => addressOf(r));
      expect(routes.map((r) => r.host).sort(), name).toEqual(NATS);
      for (const route of routes) expect(route.port).toBe(addressOf(confText(confBlock(conf(route.host), 'cluster'), 'listen')).port);
      expect(s.healthcheck?.test.join(' ')).toContain(`:${addressOf(confText(c, 'http')).port}/healthz`);
    }
    const stores = NATS.map((n) => mountsOf(svc(n)).find((m) => m.named)?.source);
    expect(new Set(stores).size).toBe(3);
  });

  it('gives nats-server configs it accepts once sync_interval is dropped (Debian 2.9.10 predates it)', (ctx) => {
    if (!natsAvailable('the nats-server check of the compose configs')) return ctx.skip();
    const dir = tempDir('vigil-compose-conf-');
    try {
      for (const name of NATS) {
        const c = conf(name);
        const jetstream = { ...confBlock(c, 'jetstream') };
        delete jetstream.sync_interval;
        const path = join(dir, `${name}.json`);
        writeFileSync(path, JSON.stringify({ ...c, jetstream }));
        const probe = spawnSync(natsServerBin()!, ['-c', path, '-t'], { encoding: 'utf8' });
        expect(probe.status, `${name}: ${probe.stderr}`).toBe(0);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs each Vigil node with `npm ci && npm start` on node:20, the repository mounted, installs in volumes of its own', () => {
    const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts.start).toMatch(/ src\/main\.ts serve$/);
    const nativeSources = readdirSync(join(ROOT, 'src/native')).filter((f) => f !== 'build');
    const volumes: string[] = [];
    for (const name of [...NODES, 'bench']) {
      const s = svc(name);
      expect(s.image, name).toMatch(NODE_IMAGE);
      const app = s.working_dir!;
      const mounts = mountsOf(s);
      expect(mounts.find((m) => m.target === app)?.source, `${name} mounts the repository`).toMatch(/^\.\/?$/);
      // npm ci writes node_modules and builds src/native: volumes of its own, so the containers
      // sharing the repository neither fight nor replace the host's.
      for (const dir of ['node_modules', 'src/native']) {
        const mount = mounts.find((m) => m.target === `${app}/${dir}`);
        expect(mount?.named, `${name}: a named volume over ${dir}`).toBe(true);
        volumes.push(mount!.source);
      }
      for (const source of nativeSources) {
        expect(mounts, `${name} mounts src/native/${source} into its native volume`).toContainEqual({ source: `./src/native/${source}`, target: `${app}/src/native/${source}`, readOnly: true, named: false });
      }
      expect(s.command?.slice(0, 2)).toEqual(['sh', '-c']);
    }
    for (const name of NODES) expect(svc(name).command?.[2]).toMatch(/^npm ci && (exec )?npm start$/);
    expect(new Set(volumes).size).toBe(volumes.length);
  });

  it('configures each node for the cluster with variables src/config.ts reads, and the env loads', () => {
    const nodeIds: string[] = [];
    const hostPorts: number[] = [];
    const dataVolumes: string[] = [];
    for (const name of NODES) {
      const s = svc(name);
      const env = environmentOf(s);
      expect(Object.keys(env).filter((k) => k.startsWith('VIGIL_') && !CONFIG_VARIABLES.includes(k)), name).toEqual([]);
      const config = loadConfig(env);
      expect(config.cluster?.servers.map((u) => addressOf(u))).toEqual(NATS.map((n) => ({ host: n, port: addressOf(confText(conf(n), 'listen')).port })));
      expect(config.cluster?.replicas).toBe(3);
      expect(config.cluster?.node).toBe(env.VIGIL_NODE_ID);
      nodeIds.push(config.cluster!.node);
      expect(config.host, 'bound beyond the container loopback, so the published port reaches it').toBe('0.0.0.0');
      expect(config.bootstrap).toBeDefined();
      // One published port, on the host's loopback, to the port the node listens on.
      const ports = publishedPorts(s);
      expect(ports).toHaveLength(1);
      expect(ports[0]!.container).toBe(config.port);
      hostPorts.push(ports[0]!.host);
      const data = mountsOf(s).find((m) => m.target === config.dataDir);
      expect(data?.named, `${name} keeps ${config.dataDir} on a named volume`).toBe(true);
      expect(file.volumes).toHaveProperty(data!.source);
      dataVolumes.push(data!.source);
      expect(s.depends_on).toEqual(Object.fromEntries(NATS.map((n) => [n, { condition: 'service_healthy' }])));
      expect(s.healthcheck?.test.join(' ')).toContain(`:${config.port}/health`);
    }
    expect(new Set(nodeIds).size).toBe(NODES.length);
    expect(hostPorts.sort()).toEqual([8081, 8082]);
    expect(new Set(dataVolumes).size).toBe(NODES.length);
  });

  it('benches both nodes with their admin key, once they are healthy', () => {
    const s = svc('bench');
    const targets = parseTargets(benchArgs(s));
    expect(targets).toEqual(NODES.map((n) => `http://${n}:${loadConfig(environmentOf(svc(n))).port}`));
    expect(s.command?.[2]).toMatch(/^npm ci && npm run bench -- /);
    expect(s.depends_on).toEqual(Object.fromEntries(NODES.map((n) => [n, { condition: 'service_healthy' }])));
    // VIGIL_ADMIN_KEY sets the nodes' key and the bench's alike; unset, both take the same default.
    for (const env of [{}, { VIGIL_ADMIN_KEY: 'vgl_from-the-shell' }] as Record<string, string>[]) {
      const key = environmentOf(s, env).VIGIL_BENCH_KEY;
      for (const node of NODES) expect(environmentOf(svc(node), env).VIGIL_BOOTSTRAP_KEY).toBe(key);
    }
  });

  it('declares every named volume it mounts, each used by one service, and every config used by one', () => {
    const used = Object.values(file.services).flatMap((s) => mountsOf(s).filter((m) => m.named).map((m) => m.source));
    expect(used.sort()).toEqual(Object.keys(file.volumes).sort());
    const configs = Object.values(file.services).flatMap((s) => (s.configs ?? []).map((c) => c.source));
    expect(configs.sort()).toEqual(Object.keys(file.configs).sort());
  });
});

describe('compose interpolation (as the tests apply it)', () => {
  it('takes the value set, else the default; `:-` treats empty as unset; `$$` is a dollar', () => {
    expect(interpolate('a ${X:-d} b', {})).toBe('a d b');
    expect(interpolate('${X:-d}', { X: 'v' })).toBe('v');
    expect(interpolate('${X:-d}', { X: '' })).toBe('d');
    expect(interpolate('${X-d}', { X: '' })).toBe('');
    expect(interpolate('$$HOME ${X}', { X: 'v' })).toBe('$HOME v');
    expect(() => interpolate('${X}', {})).toThrow(/X is not set/);
  });
});
