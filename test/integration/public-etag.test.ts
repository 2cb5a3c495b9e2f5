import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeModes, type ModeServers } from '../support/modes.js';
import { call } from '../support/server.js';

/**
 * The public ETag is a function of the served bytes alone: it must not reveal how many records
 * the org's private agents write (it used to end in `-<org ledger length>`).
 */
describeModes('public ETags', (m) => {
  let server: ModeServers;

  beforeAll(async () => {
    server = await m.start({ VIGIL_PUBLIC_RATE_LIMIT: '10000' });
    for (const agent_id of ['pub', 'pub2', 'priv']) {
      expect((await call(server.url, 'POST', '/agents/', { body: { agent_id, name: agent_id } })).status).toBe(201);
    }
    for (const agent_id of ['pub', 'pub2']) {
      expect((await call(server.url, 'PATCH', `/admin/agents/${agent_id}`, { body: { public: true } })).status).toBe(200);
    }
  });
  afterAll(() => server.close());

  /**
   * Public reads are served from memory and, in cluster mode, may trail by the replication lag
   * (DESIGN §8): each first waits until every node holds the org's last batch.
   */
  const get = async (path: string, headers: Record<string, string> = {}) => {
    await server.settle();
    return call(server.readUrl, 'GET', path, { key: null, headers });
  };

  async function privateWrites(n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      const res = await call(server.url, 'POST', '/events/', { body: { agent_id: 'priv', event_type: 'output_generated', payload: {} } });
      expect(res.status).toBe(200);
    }
  }

  async function ledgerLength(): Promise<number> {
    const res = await call(server.readUrl, 'GET', '/audit/priv/verify');
    expect(res.body.ok).toBe(true);
    return res.body.length;
  }

  const PATHS = [
    '/public/agents/acme/pub',
    '/public/agents/acme/pub2',
    '/public/agents/acme',
    '/public/agents/acme?limit=1',
    '/public/agents/acme?limit=1&offset=1',
    '/public/agents/acme?offset=50',
    '/public/agents/acme?offset=50&limit=50',
    '/public/agents/acme?offset=60',
  ];

  describe('public ETags', () => {
    it('do not carry the ledger length, and do not change with private writes when the bytes do not', async () => {
      // A page past the last listed agent names no ledger head: its bytes stay the same whatever
      // the private agent writes, and so must its ETag.
      const before = await get('/public/agents/acme?offset=50');
      expect(before.status).toBe(200);
      expect(before.body).toEqual({ org: 'acme', total: 2, limit: 50, offset: 50, agents: [] });
      const etag = before.headers.get('etag')!;
      expect(etag).toMatch(/^"[^"]+"$/);
      expect(etag.endsWith(`-${await ledgerLength()}"`)).toBe(false);

      await privateWrites(3);
      const after = await get('/public/agents/acme?offset=50');
      expect(after.text).toBe(before.text);
      expect(after.headers.get('etag')).toBe(etag);
      const revalidated = await get('/public/agents/acme?offset=50', { 'if-none-match': etag });
      expect(revalidated.status).toBe(304);
      expect(revalidated.text).toBe('');
      expect(revalidated.headers.get('etag')).toBe(etag);

      for (const path of PATHS) {
        const res = await get(path);
        expect(res.status, path).toBe(200);
        expect(res.headers.get('etag')!.endsWith(`-${await ledgerLength()}"`), path).toBe(false);
      }
    });

    it('are the same for the same bytes and differ for different bytes, across records, pages and writes', async () => {
      const seen = new Map<string, string>(); // body text → ETag
      const byEtag = new Map<string, string>(); // ETag → body text
      const observe = async (): Promise<void> => {
        for (const path of PATHS) {
          const res = await get(path);
          expect(res.status, path).toBe(200);
          const etag = res.headers.get('etag')!;
          if (seen.has(res.text)) expect(etag, path).toBe(seen.get(res.text));
          if (byEtag.has(etag)) expect(res.text, `${path} has the ETag of other bytes`).toBe(byEtag.get(etag));
          seen.set(res.text, etag);
          byEtag.set(etag, res.text);
          // Revalidation works for every public answer.
          const again = await get(path, { 'if-none-match': etag });
          expect(again.status, path).toBe(304);
        }
      };
      await observe();
      await privateWrites(2);
      await observe();
      await call(server.url, 'POST', '/events/', { body: { agent_id: 'pub', event_type: 'output_generated', payload: {} } });
      await observe();
      // Several URLs served the same bytes (offset 50 with and without limit=50), and several
      // served different bytes at one ledger length (pub and pub2).
      expect(seen.size).toBeGreaterThan(PATHS.length);
      expect(seen.size).toBeLessThan(3 * PATHS.length);
    });

    it('change with the served bytes: a stale ETag gets the new body', async () => {
      const first = await get('/public/agents/acme/pub');
      const etag = first.headers.get('etag')!;
      await privateWrites(1); // moves the org's ledger head, which the public record names
      const next = await get('/public/agents/acme/pub', { 'if-none-match': etag });
      expect(next.status).toBe(200);
      expect(next.body.ledger_head).not.toBe(first.body.ledger_head);
      expect(next.headers.get('etag')).not.toBe(etag);
      expect((await get('/public/agents/acme/pub', { 'if-none-match': next.headers.get('etag')! })).status).toBe(304);
    });
  });
});
