import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { describeModes, type ModeServers } from '../support/modes.js';
import { havePrometheus, promtool, readmeYaml, startPrometheus, until, type RunningPrometheus } from '../support/prometheus.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { ADMIN_KEY, call, ORG, startServer, type TestServer } from '../support/server.js';

/**
 * GET /metrics (DESIGN §11) scraped by a real Prometheus with the README's scrape config and rules:
 * what it answers to PromQL after real traffic over HTTP and the stream is what is checked, in both
 * modes. The format is also linted by promtool.
 */
const TOKEN = 'metrics-token-0123456789abcdef';
const prometheus = havePrometheus();

async function scrape(url: string, authorization?: string): Promise<{ status: number; type: string | null; text: string }> {
  const res = await fetch(`${url}/metrics`, { headers: authorization === undefined ? {} : { authorization } });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

/** One frame of `events` over GET /events/stream, and its answer. */
async function streamFrame(url: string, events: unknown[]): Promise<any> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/events/stream', [], { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  const answer = new Promise<any>((resolve) => ws.once('message', (data: Buffer) => resolve(JSON.parse(data.toString('utf8')))));
  ws.send(JSON.stringify({ id: 1, events }));
  const frame = await answer;
  ws.close();
  return frame;
}

/**
 * What promtool check metrics (Prometheus's own parser and linter) finds in a scrape, but for the
 * one complaint about prom-client's default metrics: it names three gauges `nodejs_active_*_total`.
 * A parse error, or any complaint about a vigil_ metric, is kept.
 */
function lintProblems(text: string): string[] {
  const { code, output } = promtool(['check', 'metrics'], text);
  const problems = output.split('\n').filter((line) => line.trim() !== '' && !/^nodejs_active_(handles|requests|resources)_total non-counter metrics should not have "_total" suffix$/.test(line));
  return code === 0 || problems.length > 0 ? problems : [];
}

/** The status of an upgrade to GET /events/stream without a key (answered as HTTP, not upgraded). */
function refusedUpgrade(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, 'ws') + '/events/stream');
    ws.once('unexpected-response', (_request, response) => {
      resolve(response.statusCode ?? 0);
      response.resume();
      ws.terminate();
    });
    ws.once('open', () => reject(new Error('upgraded without a key')));
    ws.on('error', () => undefined);
  });
}

const event = (agent: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ agent_id: agent, event_type: 'output_generated', payload: {}, ...extra });

describeModes('GET /metrics', (m) => {
  let server: ModeServers;
  let receiver: Receiver;
  let prom: RunningPrometheus | null = null;
  const sum = async (expr: string): Promise<number> => (await prom!.query(`sum(${expr})`))[0]?.value ?? NaN;

  beforeAll(async () => {
    // /fail answers 500 to every attempt: with the schedule "0" its delivery dies at once, after
    // six attempts (the schedule's last entry repeats; the sixth failure is always the last).
    receiver = await startReceiver((request) => (request.path === '/fail' ? 500 : 200));
    server = await m.start({ VIGIL_METRICS_TOKEN: TOKEN, VIGIL_WEBHOOK_ALLOW_PRIVATE: '1', VIGIL_WEBHOOK_RETRY_SCHEDULE: '0' });
  });
  afterAll(async () => {
    await prom?.close();
    await receiver.close();
  });

  it('answers only the metrics token: 401 JSON without it, with a wrong one, or with an API key', async () => {
    for (const authorization of [undefined, `Bearer ${ADMIN_KEY}`, 'Bearer wrong-token-0123456789', `Basic ${TOKEN}`]) {
      const res = await scrape(server.url, authorization);
      expect(res.status, String(authorization)).toBe(401);
      expect(JSON.parse(res.text).error.code).toBe('unauthorized');
    }
    const res = await scrape(server.url, `Bearer ${TOKEN}`);
    expect(res.status).toBe(200);
    expect(res.type).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(res.text).toContain('# TYPE vigil_http_requests_total counter');
  });

  (prometheus ? it : it.skip)('passes promtool check metrics on every node', async () => {
    for (const node of server.nodes) {
      const { text } = await scrape(node.url, `Bearer ${TOKEN}`);
      expect(lintProblems(text)).toEqual([]);
    }
  });

  (prometheus ? it : it.skip)(
    'counts requests, events by gate, batch sizes, commits and deliveries as Prometheus reads them, with the README rules loaded and VigilDeadDeliveries firing',
    async () => {
      prom = await startPrometheus(server.nodes.map((n) => n.url), TOKEN, readmeYaml('groups:'));
      await prom.scrapedSince(Date.now());
      // Before any traffic: the outcome counters are there at 0, so increase() sees the first one.
      expect(await sum('vigil_webhook_deliveries_total{outcome="dead"}')).toBe(0);

      expect((await call(server.url, 'POST', '/agents/', { body: { agent_id: 'm1', name: 'M1' } })).status).toBe(201);
      for (const path of ['/ok', '/fail']) {
        // On the owner, which makes the deliveries: it knows the webhook at once (cluster mode).
        const hook = await call(server.ownerUrl, 'POST', '/webhooks', { body: { url: receiver.url(path), events: ['gate.hold'] } });
        expect(hook.status, hook.text).toBe(200);
      }
      await server.settle(ADMIN_KEY);
      // The gates the events got, as answered: the counters must say the same.
      const gates: string[] = [];
      for (let i = 0; i < 3; i++) {
        const answer = await call(server.url, 'POST', '/events/', { body: event('m1') });
        expect(answer.status).toBe(200);
        gates.push(answer.body.gate_status);
      }
      const held = await call(server.url, 'POST', '/events/', { body: event('m1', { dti: 0.99 }) });
      expect(held.body.gate_status).toBe('hold');
      gates.push(held.body.gate_status);
      const batch = await call(server.url, 'POST', '/events/batch', { body: { events: [event('m1'), event('m1'), { agent_id: 'm1' }, event('m1')] } });
      expect(batch.status).toBe(200);
      expect(batch.body.results.filter((r: any) => 'error' in r)).toHaveLength(1);
      const frame = await streamFrame(server.url, [event('m1'), event('m1')]);
      expect(frame.results).toHaveLength(2);
      for (const result of [...batch.body.results, ...frame.results]) if (!('error' in result)) gates.push(result.gate_status);
      expect(gates).toHaveLength(9);
      const holds = gates.filter((g) => g === 'hold').length;
      expect((await call(server.url, 'GET', '/no/such/route')).status).toBe(404);
      expect(await refusedUpgrade(server.url)).toBe(401);

      // Each hold is delivered to /ok, and dies at /fail after six attempts (five retries).
      const deliveries = async (outcome: string): Promise<boolean> => (await scrape(server.ownerUrl, `Bearer ${TOKEN}`)).text.includes(`vigil_webhook_deliveries_total{outcome="${outcome}"} ${holds}\n`);
      const deliveryLines = async (): Promise<string> =>
        `${(await scrape(server.ownerUrl, `Bearer ${TOKEN}`)).text.split('\n').filter((l) => l.startsWith('vigil_webhook')).join('; ')}; received ${receiver.received.map((r) => r.path).join(' ')}`;
      await until(`the ${holds} deliveries to /fail to die`, () => deliveries('dead'), deliveryLines);
      await until(`the ${holds} deliveries to /ok to be delivered`, () => deliveries('delivered'), deliveryLines);
      await prom.scrapedSince(Date.now());

      for (const gate of ['pass', 'hold', 'alert', 'collapse']) expect(await sum(`vigil_ingest_events_total{gate="${gate}"}`), gate).toBe(gates.filter((g) => g === gate).length);
      expect(await sum('vigil_ingest_events_total{gate="refused"}')).toBe(1);
      // The batch's one refusal, inside a 200, by its code (the ingest-errors rule reads these).
      expect(await sum('vigil_ingest_refused_total{code="validation_failed"}')).toBe(1);
      expect(await prom.query('vigil_ingest_refused_total{code!="validation_failed"}')).toEqual([]);
      expect(await sum('vigil_ingest_batch_events_count{transport="http"}')).toBe(5);
      expect(await sum('vigil_ingest_batch_events_sum{transport="http"}')).toBe(8);
      expect(await sum('vigil_ingest_batch_events_count{transport="stream"}')).toBe(1);
      expect(await sum('vigil_ingest_batch_events_sum{transport="stream"}')).toBe(2);
      expect(await sum('vigil_http_requests_total{method="POST",route="/events",status="200"}')).toBe(4);
      expect(await sum('vigil_http_request_duration_seconds_count{method="POST",route="/events",status="200"}')).toBe(4);
      expect(await sum('vigil_http_requests_total{method="POST",route="/events/batch",status="200"}')).toBe(1);
      expect(await sum('vigil_http_requests_total{method="POST",route="/agents",status="201"}')).toBe(1);
      // The stream's upgrade requests: the one taken, the one refused.
      expect(await sum('vigil_http_requests_total{method="GET",route="/events/stream",status="101"}')).toBe(1);
      expect(await sum('vigil_http_requests_total{method="GET",route="/events/stream",status="401"}')).toBe(1);
      expect(await sum('vigil_http_requests_total{method="GET",route="(unmatched)",status="404"}')).toBeGreaterThanOrEqual(1);
      // The 401s of the first test, on /metrics itself.
      expect(await sum('vigil_http_requests_total{route="/metrics",status="401"}')).toBeGreaterThanOrEqual(4);
      expect(await sum('vigil_ledger_commit_records_sum')).toBeGreaterThanOrEqual(10);
      expect(await sum('vigil_ledger_commit_seconds_count')).toBeGreaterThanOrEqual(1);
      expect(await sum('vigil_webhook_deliveries_total{outcome="dead"}')).toBe(holds);
      expect(await sum('vigil_webhook_deliveries_total{outcome="delivered"}')).toBe(holds);
      expect(await sum('vigil_webhook_deliveries_total{outcome="retry"}')).toBe(5 * holds);
      expect(await sum('vigil_writer_queue_depth')).toBe(0);
      expect(await sum('process_resident_memory_bytes')).toBeGreaterThan(0);
      expect(await prom.query('nodejs_eventloop_lag_seconds')).toHaveLength(server.nodes.length);
      // Replication lag: every node of a cluster, none in embedded mode.
      expect(await prom.query('vigil_replication_lag_messages')).toHaveLength(m.mode === 'cluster' ? server.nodes.length : 0);
      // No series names an org (VIGIL_METRICS_ORG_LABELS is off).
      expect(await prom.query('{__name__=~"vigil_.+", org!=""}')).toEqual([]);

      // The README's rules: loaded, evaluated without error, and the dead delivery raises its alert.
      const rules = await prom.rules();
      expect(rules.map((r) => r.name).sort()).toEqual(['VigilDeadDeliveries', 'VigilIngestErrors', 'VigilWriterBacklog']);
      await until('every rule to be evaluated', async () => (await prom!.rules()).every((r) => r.health === 'ok'), async () => JSON.stringify(await prom!.rules()));
      await until('VigilDeadDeliveries to fire', async () => (await prom!.alerts()).some((a) => a.name === 'VigilDeadDeliveries' && a.state === 'firing'), async () => JSON.stringify(await prom!.alerts()));
      expect((await prom.alerts()).map((a) => a.name)).not.toContain('VigilIngestErrors');
    },
    90_000,
  );
});

describe('GET /metrics, settings', () => {
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.close();
  });

  it('does not exist without VIGIL_METRICS_TOKEN (404, as any unknown route)', async () => {
    const server = await startServer();
    servers.push(server);
    const res = await scrape(server.url, `Bearer ${TOKEN}`);
    expect(res.status).toBe(404);
    expect(JSON.parse(res.text).error.code).toBe('not_found');
  });

  it('labels events and writer queues by org only with VIGIL_METRICS_ORG_LABELS=1', async () => {
    const server = await startServer({ VIGIL_METRICS_TOKEN: TOKEN, VIGIL_METRICS_ORG_LABELS: '1' });
    servers.push(server);
    expect((await call(server.url, 'POST', '/agents/', { body: { agent_id: 'o1', name: 'O1' } })).status).toBe(201);
    expect((await call(server.url, 'POST', '/events/', { body: event('o1') })).status).toBe(200);
    const { text } = await scrape(server.url, `Bearer ${TOKEN}`);
    expect(text).toContain(`vigil_ingest_events_total{gate="pass",org="${ORG}"} 1`);
    expect(text).toContain(`vigil_writer_queue_depth{org="${ORG}"} 0`);
    if (prometheus) expect(lintProblems(text)).toEqual([]);
  });

  it('writes one access line per request at debug: route, status, time and key id, never the key', async () => {
    const lines: { msg: string; fields?: Record<string, unknown> }[] = [];
    const server = await startServer({}, undefined, lines);
    servers.push(server);
    const me = await call(server.url, 'GET', '/orgs/me?x=1');
    expect(me.status).toBe(200);
    expect((await call(server.url, 'GET', '/orgs/me', { key: 'vgl_unknown' })).status).toBe(401);
    const access = lines.filter((l) => l.msg === 'request');
    expect(access).toHaveLength(2);
    // At debug: a server at the default level (info) writes none of them.
    expect(access.map((l) => (l as { level?: string }).level)).toEqual(['debug', 'debug']);
    expect(access[0]!.fields).toMatchObject({ method: 'GET', route: '/orgs/me', url: '/orgs/me?x=1', status: 200, key_id: me.body.key.id });
    expect(typeof access[0]!.fields!.ms).toBe('number');
    expect(access[1]!.fields).toMatchObject({ method: 'GET', route: '/orgs/me', status: 401 });
    expect(access[1]!.fields!.key_id).toBeUndefined();
    // The stream's upgrade, taken (101) and refused (401).
    await streamFrame(server.url, []).catch(() => undefined);
    expect(await refusedUpgrade(server.url)).toBe(401);
    const upgrades = lines.filter((l) => l.msg === 'request' && l.fields?.route === '/events/stream');
    expect(upgrades.map((l) => l.fields!.status)).toEqual([101, 401]);
    expect(upgrades[0]!.fields!.key_id).toBe(me.body.key.id);
    expect(JSON.stringify(lines)).not.toContain(ADMIN_KEY);
  });
});
