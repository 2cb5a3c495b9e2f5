import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { AgentDirectory } from '../../src/actors/agent-directory.js';
import type { CommandRouter } from '../../src/bus/command-router.js';
import { LmdbStudioAgentStore, type StudioAgentStore } from '../../src/demo/studio-store.js';
import { KvStudioAgentStore } from '../../src/nats/kv-studio-agent-store.js';
import { FORBIDDEN_REQUEST_DTI, Studio, type StudioOptions } from '../../src/services/studio.js';
import { TemplateModel } from '../../src/demo/template-model.js';
import { rowBody } from '../../src/domain/ledger.js';
import type { LmdbEnv } from '../../src/store/lmdb-env.js';
import type { LmdbLedger } from '../../src/store/lmdb-ledger.js';
import { embedded } from '../support/embedded.js';
import { removeDir, tempDir } from '../support/server.js';
import { captureLogger } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';

/**
 * The Studio over the real org writer, command router and studio agent store, without HTTP (the
 * routes are covered by demo-routes.test.ts against the running service). Every case runs with
 * the LMDB store and with the KV store of cluster mode on a real nats-server.
 */
interface StoreBackend {
  name: string;
  /** The store of the data dir `dir` (KV: a bucket of its own per dir, so a restart finds it again). */
  open(dir: string, env: LmdbEnv): Promise<{ store: StudioAgentStore; close(): Promise<void> }>;
}

const LMDB: StoreBackend = { name: 'LMDB', open: async (_dir, env) => ({ store: new LmdbStudioAgentStore(env), close: async () => {} }) };

let nats: Promise<NatsServers> | null = null;
const buckets = new Map<string, string>();
const KV: StoreBackend = {
  name: 'KV',
  async open(dir) {
    nats ??= startNats({ nodes: 1 });
    const nc = await connect({ servers: (await nats).urls });
    if (!buckets.has(dir)) buckets.set(dir, `studio_${buckets.size}`);
    const store = await KvStudioAgentStore.open(nc, { replicas: 1, bucket: buckets.get(dir)! });
    const close = async (): Promise<void> => {
      await store.close();
      await nc.close();
    };
    return { store, close };
  },
};
afterAll(async () => {
  await (await nats)?.stop();
});

const backends = (natsAvailable('Studio over the KV store') ? [LMDB, KV] : [LMDB]).map((b) => [b.name, b] as const);
/** The store the cases of the describe running now use. */
let backend = LMDB;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const DOMAINS = ['clinical', 'insurance', 'wellness', 'pharmacy', 'benefits'];
const BASE = 'http://vigil.test';

type Commands = Pick<CommandRouter, 'request'>;

interface Node {
  store: LmdbLedger;
  bus: Commands;
  directory: AgentDirectory;
  logs: { msg: string; fields?: Record<string, unknown> }[];
  studio(over?: Partial<StudioOptions>): Promise<Studio>;
  close(): Promise<void>;
}

/** One process's worth of the service's write path, on `dir`; `wrap` may intercept commands. */
async function node(dir: string, wrap: (bus: Commands) => Commands = (b) => b): Promise<Node> {
  const path = embedded(dir, { maxPending: 10_000 });
  const directory = new AgentDirectory();
  await path.ledger.subscribe((batch) => {
    directory.onCommitted(batch.org, batch.rows);
    path.actors.onReplay(batch);
  }, path.ledger.positionAfter(new Map()));
  path.actors.finishReplay();
  const bus = wrap(path.commands);
  const agents = await backend.open(dir, path.stores.env);
  const logs: Node['logs'] = [];
  const studios: Studio[] = [];
  const n: Node = {
    store: path.stores.ledger,
    bus,
    directory,
    logs,
    async studio(over = {}) {
      const studio = await Studio.start({
        commands: bus,
        directory,
        store: agents.store,
        model: new TemplateModel(),
        baseUrl: BASE,
        seedOrgs: ['acme'],
        now: Date.now,
        log: captureLogger(logs),
        ...over,
      });
      studios.push(studio);
      return studio;
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const s of studios) await s.close();
      await agents.close();
      await path.close();
    },
  };
  let closed = false;
  cleanups.push(() => n.close());
  return n;
}

function dataDir(): string {
  const dir = tempDir('vigil-studio-');
  cleanups.unshift(async () => removeDir(dir));
  return dir;
}

const ledgerRows = (n: Node, org: string) => [...n.store.range(org, 1)].map((r) => ({ seq: r.seq, kind: r.kind, agentId: r.agentId, body: rowBody(r) }));

describe.each(backends)('Studio seeding (%s store)', (_name, b) => {
  beforeAll(() => {
    backend = b;
  });

  it('seeds one deployed agent per domain at start, each a sandbox ledger agent, and again not on restart', async () => {
    const dir = dataDir();
    const first = await node(dir);
    const studio = await first.studio();
    const seeds = await studio.list('acme');
    expect(seeds.map((a) => a.agent_id)).toEqual(DOMAINS.map((d) => `studio-${d}`));
    expect(seeds.map((a) => a.id)).toEqual([1, 2, 3, 4, 5]);
    for (const a of seeds) {
      expect(a).toMatchObject({ is_seed: true, status: 'deployed', deploy_endpoint: `${BASE}/chat/${a.agent_id}` });
      expect(a.forbidden_actions.length).toBeGreaterThan(0);
      expect(typeof a.deployed_at).toBe('string');
      expect(first.directory.get('acme', a.agent_id)).toMatchObject({ kind: 'sandbox', name: a.name, is_active: true });
    }
    const registrations = ledgerRows(first, 'acme').filter((r) => r.kind === 'agent');
    expect(registrations).toHaveLength(5);
    await first.close();

    const second = await node(dir);
    const again = await (await second.studio()).list('acme');
    expect(again).toEqual(seeds);
    expect(ledgerRows(second, 'acme').filter((r) => r.kind === 'agent')).toHaveLength(5);
    expect(second.logs).toEqual([]);
  });

  it('seeds any other org lazily, on its first request', async () => {
    const n = await node(dataDir());
    const studio = await n.studio();
    expect(n.directory.get('other', 'studio-clinical')).toBeUndefined();
    const listed = await studio.list('other');
    expect(listed).toHaveLength(5);
    expect(n.directory.get('other', 'studio-wellness')?.kind).toBe('sandbox');
  });

  it('adopts a ledger agent already registered under a seed id (retired stays retired)', async () => {
    const n = await node(dataDir());
    await n.bus.request({ type: 'agent.register', org: 'acme', agent: { agent_id: 'studio-pharmacy', name: 'Mine', kind: 'production', observed: true } });
    await n.bus.request({ type: 'agent.update', org: 'acme', agentId: 'studio-pharmacy', changes: { is_active: false } });
    const studio = await n.studio();
    const seeds = await studio.list('acme');
    expect(seeds).toHaveLength(5);
    expect(seeds.find((a) => a.agent_id === 'studio-pharmacy')).toMatchObject({ status: 'retired', is_seed: true });
    expect(new Set(seeds.map((a) => a.id)).size).toBe(5);
  });

  it('logs a failed seeding and retries it on the next request', async () => {
    let refuse = true;
    const n = await node(dataDir(), (bus) => ({
      request: (c) =>
        refuse && c.type === 'agent.register' && c.agent.agent_id === 'studio-wellness'
          ? Promise.resolve({ ok: false, code: 'unavailable', message: 'disk on fire' } as never)
          : bus.request(c),
    }));
    const studio = await n.studio();
    expect((await studio.list('acme')).map((a) => a.agent_id)).toEqual(['studio-clinical', 'studio-insurance']);
    expect(n.logs.some((l) => l.msg.includes('seeding studio agents failed') && l.fields?.org === 'acme')).toBe(true);
    refuse = false;
    expect((await studio.list('acme')).map((a) => a.agent_id)).toEqual(DOMAINS.map((d) => `studio-${d}`));
  });

  it('seeds what a plan limit leaves room for, logs it once and retries at most once a minute', async () => {
    let room = 2;
    let attempts = 0;
    const n = await node(dataDir(), (bus) => ({
      request: (c) => {
        if (c.type !== 'agent.register') return bus.request(c);
        attempts++;
        if (room <= 0) return Promise.resolve({ ok: false, code: 'plan_limit', message: 'the free plan allows 2 agents' } as never);
        room--;
        return bus.request(c);
      },
    }));
    let now = Date.parse('2030-01-01T00:00:00Z');
    const studio = await n.studio({ now: () => now });
    const seeded = ['studio-clinical', 'studio-insurance'];
    expect((await studio.list('acme')).map((a) => a.agent_id)).toEqual(seeded);
    expect(attempts).toBe(5);
    for (let i = 0; i < 3; i++) expect((await studio.list('acme')).map((a) => a.agent_id)).toEqual(seeded);
    expect(attempts).toBe(5);
    now += 30_000;
    await studio.list('acme');
    expect(attempts).toBe(5);
    now += 31_000;
    await Promise.all([studio.list('acme'), studio.list('acme')]);
    expect(attempts).toBe(8);
    expect(n.logs.filter((l) => l.msg.includes('plan limit'))).toEqual([
      { msg: expect.stringContaining('retried at most once a minute'), fields: { org: 'acme', error: 'the free plan allows 2 agents' } },
    ]);
    expect(n.logs.some((l) => l.msg.includes('seeding studio agents failed'))).toBe(false);
    room = 3;
    now += 61_000;
    expect((await studio.list('acme')).map((a) => a.agent_id)).toEqual(DOMAINS.map((d) => `studio-${d}`));
    now += 61_000;
    await studio.list('acme');
    expect(attempts).toBe(11);
    expect(n.logs).toHaveLength(1);
  });
});

describe.each(backends)('Studio agents (%s store)', (_name, b) => {
  beforeAll(() => {
    backend = b;
  });

  const body = {
    name: 'Triage Helper',
    description: null,
    domain: 'clinical' as const,
    risk_level: 'high' as const,
    persona: null,
    allowed_actions: ['explain care plans'],
    forbidden_actions: ['diagnose conditions'],
  };

  it('creates drafts with ids in order, also under concurrent requests, and registers each ledger agent', async () => {
    const n = await node(dataDir());
    let i = 0;
    const studio = await n.studio({ newSuffix: () => (++i).toString(16).padStart(6, '0') });
    const created = await Promise.all([1, 2, 3, 4].map((k) => studio.create('acme', { ...body, name: `Helper ${k}` })));
    const agents = created.map((c) => (c.ok ? c.value : null));
    expect(agents.map((a) => a?.id).sort()).toEqual([6, 7, 8, 9]);
    expect(agents.map((a) => a?.agent_id).sort()).toEqual(['helper-1-000001', 'helper-2-000002', 'helper-3-000003', 'helper-4-000004']);
    for (const a of agents) {
      expect(a).toMatchObject({ status: 'draft', is_seed: false, deployed_at: null, deploy_endpoint: null, risk_level: 'high' });
      expect(n.directory.get('acme', a!.agent_id)).toMatchObject({ kind: 'sandbox', name: a!.name, created_at: a!.created_at });
    }
  });

  it('draws another suffix when the agent_id is taken by a ledger agent', async () => {
    const n = await node(dataDir());
    await n.bus.request({ type: 'agent.register', org: 'acme', agent: { agent_id: 'triage-helper-aaaaaa', name: 'X', kind: 'production', observed: true } });
    const suffixes = ['aaaaaa', 'bbbbbb'];
    const studio = await n.studio({ newSuffix: () => suffixes.shift() ?? 'cccccc' });
    const created = await studio.create('acme', body);
    expect(created.ok && created.value.agent_id).toBe('triage-helper-bbbbbb');
  });

  it('chats only while deployed, scores a forbidden request with dti ≥ 0.9 and retires the ledger agent with the studio agent', async () => {
    const n = await node(dataDir());
    const studio = await n.studio();
    const created = await studio.create('acme', body);
    if (!created.ok) throw new Error(created.message);
    const id = created.value.agent_id;
    const chat = (message: string, dti: number | null = null) => studio.chat('acme', id, { message, history: [], dti }, 'chat:test');
    expect(await chat('hello')).toMatchObject({ ok: false, code: 'conflict' });
    expect(await studio.deploy('acme', id)).toMatchObject({ ok: true, value: { status: 'deployed', deploy_endpoint: `${BASE}/chat/${id}` } });

    const clean = await chat('Could you explain care plans?');
    if (!clean.ok) throw new Error(clean.message);
    expect(clean.value.result).toMatchObject({ gate_status: 'pass', agent_name: 'Triage Helper', agent_domain: 'clinical', agent_risk: 'high' });
    expect(clean.value.result.response).toContain('Yes, I can explain care plans.');
    const bad = await chat('Please diagnose my chest pain', 0.2);
    if (!bad.ok) throw new Error(bad.message);
    expect(bad.value.result.bii).toBeLessThan(clean.value.result.bii);
    expect(bad.value.result.gate_status).not.toBe('pass');
    expect(bad.value.result.response).toMatch(/^This reply is held for human review/);

    const events = ledgerRows(n, 'acme').filter((r) => r.kind === 'event' && r.agentId === id);
    expect(events).toHaveLength(2);
    expect(events[0]!.body).toMatchObject({ event_type: 'output_generated', dti: null, source: 'service', actor: 'chat:test' });
    expect(events[0]!.body.payload).toMatchObject({ forbidden_request: false, provider: 'builtin' });
    expect(events[1]!.body).toMatchObject({ dti: FORBIDDEN_REQUEST_DTI });
    expect(events[1]!.body.payload).toMatchObject({ forbidden_request: true, matched_action: 'diagnose conditions' });

    expect(await studio.setStatus('acme', id, 'paused')).toMatchObject({ ok: true, value: { status: 'paused' } });
    expect(await chat('hello')).toMatchObject({ ok: false, code: 'conflict' });
    expect(await studio.setStatus('acme', id, 'retired')).toMatchObject({ ok: true, value: { status: 'retired' } });
    expect(n.directory.get('acme', id)?.is_active).toBe(false);
    expect(await studio.deploy('acme', id)).toMatchObject({ ok: false, code: 'conflict' });
    expect(await studio.setStatus('acme', id, 'retired')).toMatchObject({ ok: true });
  });

  it('answers not_found for another org’s agent', async () => {
    const n = await node(dataDir());
    const studio = await n.studio();
    expect(await studio.get('acme', 'studio-clinical')).toMatchObject({ ok: true });
    expect(await studio.get('other', 'nope')).toMatchObject({ ok: false, code: 'not_found' });
    const created = await studio.create('acme', body);
    expect(await studio.get('other', created.ok ? created.value.agent_id : '')).toMatchObject({ ok: false, code: 'not_found' });
  });
});
