import { beforeAll, describe, expect, it } from 'vitest';
import { describeModes, type ModeServers } from '../support/modes.js';
import { ADMIN_KEY, call } from '../support/server.js';

/**
 * The audit:read scope (DESIGN §11): a read-only key for auditors. It reads what any key reads and
 * the audit routes (export, verify, checkpoint, proofs, bundles), and nothing else; the audit
 * routes stay bearer routes (any key, as the spec has them) unless VIGIL_STRICT_AUDIT=1, which
 * leaves them to audit:read and admin keys. In both modes: in cluster mode writes go to the node
 * that owns no org and reads to the other, so a key is checked on a node that did not make it.
 */
describeModes('the audit:read scope', (m) => describe.each([
  { strict: false, what: 'bearer audit routes (the default)' },
  { strict: true, what: 'VIGIL_STRICT_AUDIT=1' },
])('$what', ({ strict }) => {
  let s: ModeServers;
  /** A node that reads, and one that writes (the same one in embedded mode). */
  const server = { get url(): string { return s.readUrl; } };
  const writer = { get url(): string { return s.url; } };
  const keys: Record<'auditor' | 'runtime' | 'reviewer', string> = { auditor: '', runtime: '', reviewer: '' };

  beforeAll(async () => {
    s = await m.start(strict ? { VIGIL_STRICT_AUDIT: '1' } : {});
    const server = writer;
    for (const [name, scopes] of [
      ['auditor', ['audit:read']],
      ['runtime', ['events:write']],
      ['reviewer', ['review']],
    ] as const) {
      const made = await call(server.url, 'POST', '/admin/keys', { body: { scopes, name } });
      expect(made.status, made.text).toBe(201);
      keys[name] = made.body.key;
    }
    expect((await call(server.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } })).status).toBe(201);
    expect((await call(server.url, 'POST', '/events/', { key: keys.runtime, body: { agent_id: 'a', event_type: 'output_generated', payload: { secret: 'p' } } })).status).toBe(200);
    await s.settle(ADMIN_KEY, ...Object.values(keys));
  }, 60_000);

  const audit: [string, string, unknown?][] = [
    ['GET', '/audit/export'],
    ['GET', '/audit/a/verify'],
    ['GET', '/audit/checkpoint'],
    ['GET', '/audit/proof/inclusion?seq=1'],
    ['GET', '/audit/proof/consistency?from=1&to=2'],
    ['GET', '/exports'],
    ['POST', '/exports/bundle', { since_seq: 0, until_seq: 2 }],
  ];

  it('an audit:read key reads every audit route and what any key reads', async () => {
    for (const [method, path, body] of [...audit, ['GET', '/orgs/me'], ['GET', '/agents'], ['GET', '/agents/a'], ['GET', '/billing/plan']] as [string, string, unknown?][]) {
      const res = await call(server.url, method, path, { key: keys.auditor, body });
      expect(res.status, `${method} ${path}: ${res.text.slice(0, 200)}`).toBe(200);
    }
  });

  it('an audit:read key writes nothing: 403, and nothing is recorded', async () => {
    const before = (await call(server.url, 'GET', '/audit/export')).text;
    const writes: [string, string, unknown?][] = [
      ['POST', '/agents/', { agent_id: 'b', name: 'B' }],
      ['POST', '/events/', { agent_id: 'a', event_type: 'output_generated', payload: {} }],
      ['POST', '/events/batch', { events: [{ agent_id: 'a', event_type: 'output_generated', payload: {} }] }],
      ['PATCH', '/admin/agents/a', { public: true }],
      ['POST', '/admin/keys', { scopes: ['admin'] }],
      ['GET', '/admin/keys'],
      ['GET', '/webhooks'],
      ['GET', '/reviews'],
    ];
    for (const [method, path, body] of writes) {
      const res = await call(server.url, method, path, { key: keys.auditor, body });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.error.code).toBe('forbidden');
    }
    const refused = await call(server.url, 'POST', '/agents/', { key: keys.auditor, body: { agent_id: 'b', name: 'B' } });
    expect(refused.body.error.message).toBe('an audit:read key only reads: this route needs an events:write, review or admin key');
    expect((await call(server.url, 'GET', '/audit/export')).text).toBe(before);
  });

  it(strict ? 'other keys are refused the audit routes (403), the admin key is not, and other reads stay open' : 'every key still reads the audit routes, as the spec\'s bearer routes', async () => {
    for (const [method, path, body] of audit) {
      for (const who of ['runtime', 'reviewer'] as const) {
        const res = await call(server.url, method, path, { key: keys[who], body });
        expect(res.status, `${who}: ${method} ${path}`).toBe(strict ? 403 : 200);
        if (strict) expect(res.body.error.message).toBe('this route needs the audit:read (or admin) scope: VIGIL_STRICT_AUDIT is on');
      }
      expect((await call(server.url, method, path, { key: ADMIN_KEY, body })).status, `admin: ${method} ${path}`).toBe(200);
    }
    expect((await call(server.url, 'GET', '/orgs/me', { key: keys.runtime })).status).toBe(200);
    expect((await call(server.url, 'GET', '/agents/a', { key: keys.runtime })).status).toBe(200);
  });
}));
