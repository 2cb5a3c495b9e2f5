import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { hashKey } from '../../src/domain/keys.js';
import { KvRegistryStore, REGISTRY_BUCKETS } from '../../src/nats/kv-registry-store.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';
import { call, removeDir, runCli, STACK_LINE, startServer, tempDir } from '../support/server.js';

/**
 * `keys create` and `orgs set-plan` against the cluster (VIGIL_NATS_URL): the real CLI as a
 * process, a real nats-server, and a KvRegistryStore watching the buckets as a serving node would.
 * The same commands run embedded beside them, so the two outputs can be compared.
 */
const run = natsAvailable('CLI against the cluster') ? describe : describe.skip;

run('CLI with VIGIL_NATS_URL', () => {
  let servers: NatsServers | undefined;
  let nc: NatsConnection;
  let node: KvRegistryStore;
  let dir: string;
  /** A data dir that must never be made: in cluster mode the CLI touches none. */
  let unused: string;
  const cluster = (): Record<string, string> => ({ VIGIL_NATS_URL: servers!.urls[0]!, VIGIL_DATA_DIR: unused });

  beforeAll(async () => {
    servers = await startNats({ nodes: 1 });
    nc = await connect({ servers: servers.urls });
    node = await KvRegistryStore.open(nc, { replicas: 1 });
    dir = tempDir('vigil-cli-cluster-');
    unused = join(dir, 'never');
  });
  afterAll(async () => {
    await node?.close();
    await nc?.close();
    await servers?.stop();
    if (dir !== undefined) removeDir(dir);
  });

  it('keys create writes the key (and its new org) to the KV buckets, seen by a running node, with the embedded output', async () => {
    const args = ['keys', 'create', '--org', 'acme', '--scopes', 'events:write,admin', '--name', 'ci'];
    const [inCluster, embedded] = await Promise.all([runCli(args, cluster()), runCli(args, { VIGIL_DATA_DIR: join(dir, 'embedded') })]);
    for (const r of [inCluster, embedded]) {
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
    }
    const shape = (stdout: string) => {
      const [json, key, ...rest] = stdout.split('\n');
      const parsed = JSON.parse(json!) as Record<string, unknown>;
      return { parsed: { ...parsed, id: typeof parsed.id }, key: /^vgl_[A-Za-z0-9_-]{43}$/.test(key!), rest };
    };
    expect(shape(inCluster.stdout)).toEqual(shape(embedded.stdout));
    expect(shape(inCluster.stdout)).toEqual({ parsed: { id: 'string', org: 'acme', scopes: ['events:write', 'admin'], name: 'ci' }, key: true, rest: [''] });

    const [json, key] = inCluster.stdout.split('\n') as [string, string];
    const { id } = JSON.parse(json) as { id: string };
    await expect.poll(() => node.getKey(hashKey(key)), { timeout: 5000 }).toMatchObject({ id, org: 'acme', scopes: ['events:write', 'admin'], name: 'ci' });
    expect(node.getOrg('acme')).toMatchObject({ slug: 'acme', plan: 'free' });
    expect(existsSync(unused)).toBe(false);
    // One server, no cluster: buckets of one replica.
    const jsm = await jetstreamManager(nc);
    expect((await jsm.streams.info(`KV_${REGISTRY_BUCKETS.keys}`)).config.num_replicas).toBe(1);
  });

  it('orgs set-plan changes the plan a running node reads, or creates the org on it, and refuses a bad slug as embedded does', async () => {
    const set = ['orgs', 'set-plan', '--org', 'acme', '--plan', 'team', '--billing-email', 'billing@acme.example'];
    const create = ['orgs', 'set-plan', '--org', 'newco', '--plan', 'scale'];
    const bad = ['orgs', 'set-plan', '--org', 'No Body', '--plan', 'team'];
    const [changed, created, refused] = await Promise.all([runCli(set, cluster()), runCli(create, cluster()), runCli(bad, cluster())]);
    expect(changed).toMatchObject({
      code: 0,
      stderr: '',
      stdout: '{"org":"acme","plan":"team","billing_email":"billing@acme.example","previous_plan":"free"}\norg acme: plan free -> team, billing e-mail billing@acme.example\n',
    });
    expect(created).toMatchObject({ code: 0, stderr: '', stdout: '{"org":"newco","plan":"scale","billing_email":null,"previous_plan":null}\ncreated org newco on plan scale\n' });
    await expect.poll(() => node.getOrg('acme')?.plan, { timeout: 5000 }).toBe('team');
    expect(node.getOrg('acme')?.billing_email).toBe('billing@acme.example');
    await expect.poll(() => node.getOrg('newco')?.plan, { timeout: 5000 }).toBe('scale');
    expect(refused).toMatchObject({ code: 2, stdout: '', stderr: 'vigil orgs: --org: org slug is 1-64 lowercase letters, digits or inner hyphens\n' });
    expect(existsSync(unused)).toBe(false);

    // A Vigil node started on the cluster then bills the created org on its plan (its bootstrap key joins newco).
    const server = await startServer({ VIGIL_NATS_URL: servers!.urls[0]!, VIGIL_NODE_ID: 'node-1', VIGIL_BOOTSTRAP_ORG: 'newco' }, join(dir, 'node'));
    try {
      expect((await call(server.url, 'GET', '/billing/plan')).body).toMatchObject({ org: 'newco', plan: 'scale', billing_email: null });
    } finally {
      await server.close();
    }
  });

  it('says in one line, without a stack, that NATS cannot be reached', async () => {
    const gone = servers!.urls[0]!.replace(/:\d+$/, ':1');
    const r = await runCli(['orgs', 'set-plan', '--org', 'acme', '--plan', 'team'], { VIGIL_NATS_URL: gone, VIGIL_DATA_DIR: unused });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^vigil orgs: cannot reach NATS at nats:\/\/127\.0\.0\.1:1: .+\n$/);
    expect(r.stderr).not.toMatch(STACK_LINE);
    expect(existsSync(unused)).toBe(false);
  });
});
