import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANSWERED_BY } from '../../src/http/keyed-reads.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';
import { call, removeDir, spawnServer, startServer, tempDir, type ServerProcess, type TestServer } from '../support/server.js';

/**
 * The org's log in cluster mode (issue 31): tiles and consistency proofs read the org's Merkle
 * tree, which only its owner is sure to hold, so a node that does not own the org admits the
 * request (its public rate limit, CORS) and forwards it to the owner; routes answered locally (the
 * export, the chain verification) read only the ledger rows a catch-up guarantees. One partition,
 * owned by node A (started first, its own process, so that it can die holding its lease). Node B keeps no Merkle trees at all (every tree counts as being
 * rebuilt: a local answer would be a 503), as a node that does not own an org will not keep its tree.
 */
const run = natsAvailable('cluster log routes') ? describe : describe.skip;

const event = (i: number) => ({ agent_id: 'pub', event_type: 'output_generated', payload: { i }, dti: 0.2 });

async function until(what: string, ok: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

run('cluster log routes', () => {
  let nats: NatsServers;
  const dirs: string[] = [];
  let a: ServerProcess;
  let b: TestServer;
  const env = (node: string, publicLimit: string): Record<string, string> => ({
    VIGIL_NATS_URL: nats.urls.join(','),
    VIGIL_NODE_ID: node,
    VIGIL_PARTITIONS: '1',
    VIGIL_LEASE_SECONDS: '10',
    VIGIL_PUBLIC_RATE_LIMIT: publicLimit,
  });
  const dir = (): string => {
    const made = tempDir('vigil-log-routes-');
    dirs.push(made);
    return made;
  };
  const pub = (server: { url: string }, path: string) => fetch(server.url + path);
  const bytes = async (res: Response): Promise<Buffer> => Buffer.from(await res.arrayBuffer());

  beforeAll(async () => {
    nats = await startNats({ nodes: 1 });
    a = await spawnServer(dir(), env('node-a', '100000'));
    await until('node A to own the partition', async () => (await call(a.url, 'GET', '/health')).body.partitions_owned.length === 1);
    b = await startServer(env('node-b', '50000'), dir(), undefined, { transparencyLog: false });
    expect((await call(b.url, 'GET', '/health')).body.partitions_owned).toEqual([]);
    expect((await call(a.url, 'POST', '/agents/', { body: { agent_id: 'pub', name: 'Bot pub' } })).status).toBe(201);
    expect((await call(a.url, 'PATCH', '/admin/agents/pub', { body: { public: true } })).status).toBe(200);
    // 300 events: 302 records, a full tile of level 0 and a partial one.
    for (let i = 0; i < 30; i++) {
      const batch = await call(a.url, 'POST', '/events/batch', { body: { events: Array.from({ length: 10 }, (_, j) => event(i * 10 + j)) } });
      expect(batch.status).toBe(200);
    }
    // The org is public on node B once the owner's records reach it (the bucket every node mirrors).
    await until('node B to list the public agent', async () => (await pub(b, '/public/agents/acme')).status === 200);
  }, 90_000);

  afterAll(async () => {
    await b?.close().catch(() => undefined);
    a?.child.kill('SIGKILL');
    await a?.exited;
    await nats?.stop();
    for (const dir of dirs) removeDir(dir);
  });

  it('answers a tile and a consistency proof asked of the non-owner with the owner\'s bytes, naming the owner', async () => {
    for (const path of ['/public/tiles/acme/tile/0/000', '/public/tiles/acme/tile/0/001.p/46', '/public/tiles/acme/tile/1/000.p/1']) {
      const [onA, onB] = [await pub(a, path), await pub(b, path)];
      expect(onA.status, path).toBe(200);
      expect(onB.status, path).toBe(200);
      expect((await bytes(onB)).equals(await bytes(onA)), path).toBe(true);
      expect(onB.headers.get(ANSWERED_BY), path).toBe('node-a');
      expect(onA.headers.get(ANSWERED_BY), path).toBeNull();
      // Immutable as the owner serves it; CORS and the rate limit are the node asked's.
      expect(onB.headers.get('cache-control'), path).toBe('public, max-age=31536000, immutable');
      expect(onB.headers.get('content-type'), path).toBe('application/octet-stream');
      expect(onB.headers.get('access-control-allow-origin'), path).toBe('*');
      expect(onB.headers.get('x-ratelimit-limit'), path).toBe('50000');
      expect(onA.headers.get('x-ratelimit-limit'), path).toBe('100000');
    }
    const proof = '/public/proof/acme/consistency?from=100&to=302';
    const [onA, onB] = [await pub(a, proof), await pub(b, proof)];
    expect(onA.status).toBe(200);
    const text = await onB.text();
    expect(text).toBe(await onA.text());
    expect(JSON.parse(text)).toMatchObject({ from: 100, to: 302 });
    expect(onB.headers.get(ANSWERED_BY)).toBe('node-a');
    expect(onB.headers.get('x-ratelimit-limit')).toBe('50000');
  }, 30_000);

  it('forwards errors as errors: the owner\'s status and body; an org without a public agent is a 404 of the node asked', async () => {
    for (const path of ['/public/proof/acme/consistency?from=1&to=999', '/public/proof/acme/consistency?from=5', '/public/tiles/acme/tile/0/009', '/public/tiles/acme/tile/0/0x1']) {
      const [onA, onB] = [await pub(a, path), await pub(b, path)];
      expect(onA.status, path).toBeGreaterThanOrEqual(400);
      expect(onB.status, path).toBe(onA.status);
      expect(await onB.text(), path).toBe(await onA.text());
      expect(onB.headers.get(ANSWERED_BY), path).toBe('node-a');
      expect(onB.headers.get('cache-control'), path).toBe(onA.headers.get('cache-control'));
      expect(onB.headers.get('access-control-allow-origin'), path).toBe('*');
    }
    for (const path of ['/public/tiles/nobody/tile/0/000', '/public/proof/nobody/consistency?from=1&to=2']) {
      const [onA, onB] = [await pub(a, path), await pub(b, path)];
      expect(onB.status, path).toBe(404);
      expect(await onB.text(), path).toBe(await onA.text());
      expect(onB.headers.get(ANSWERED_BY), path).toBeNull();
    }
  }, 30_000);

  it('answers the export and a chain verification asked of the non-owner as the owner does, right after a write', async () => {
    expect((await call(a.url, 'POST', '/agents/', { body: { agent_id: 'late', name: 'Late' } })).status).toBe(201);
    expect((await call(a.url, 'POST', '/events/', { body: { ...event(999), agent_id: 'late' } })).status).toBe(200);
    for (const path of ['/audit/export', '/audit/export?since_seq=290&agent_id=late', '/audit/late/verify', '/audit/pub/verify', '/audit/nobody/verify']) {
      const onB = await call(b.url, 'GET', path);
      const onA = await call(a.url, 'GET', path);
      expect(onB.status, path).toBe(onA.status);
      expect(onB.text, path).toBe(onA.text);
    }
    expect((await call(b.url, 'GET', '/audit/late/verify')).body).toMatchObject({ ok: true, length: 304, agent_records: 2 });
    expect((await call(b.url, 'GET', '/audit/nobody/verify')).status).toBe(404);
  }, 30_000);

  it('answers 503 with Retry-After when no owner answers (node A killed, its lease not yet expired)', async () => {
    a.child.kill('SIGKILL');
    await a.exited;
    const res = await pub(b, '/public/tiles/acme/tile/0/000');
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('unavailable');
    // The command router's answer when no owner takes the read, as for a keyed read.
    expect(error.message).toBe('no writer of org acme answered in time; nothing was recorded, retry');
  }, 30_000);
});
