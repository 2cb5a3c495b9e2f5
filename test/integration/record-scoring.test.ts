import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalize } from '../../src/domain/jcs.js';
import { hashKey } from '../../src/domain/keys.js';
import { RUBRIC_V1 } from '../../src/record-scoring/rubric.js';
import { call, removeDir, startServer as start, type TestServer } from '../support/server.js';

// The real service: HTTP over uWebSockets.js and a real LMDB data dir.
let server: TestServer;
beforeAll(async () => {
  server = await start();
});
afterAll(async () => {
  await server.close();
  removeDir(server.dataDir);
});

/** The data dir's files (not the serving lock, a symbolic link naming the server's pid). */
const dataFiles = (): string[] => readdirSync(server.dataDir, { withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name);

let emails = 0;
const freshEmail = (): string => `dev${++emails}-${process.pid}@example.com`;
const today = (): string => new Date().toISOString().slice(0, 10);

async function issueKey(email = freshEmail()): Promise<string> {
  const res = await call(server.url, 'POST', '/api/v1/keys', { key: null, body: { email } });
  expect(res.status).toBe(201);
  return res.body.key as string;
}

const cleanRecord = (): Record<string, unknown> => ({
  record_id: 'rec-2024-0001',
  source: 'registry-a',
  vintage: today(),
  fields: { hba1c: 6.1, glucose_mg_dl: 104, test_name: 'HbA1c', collected_on: '2024-05-01' },
  consent: { status: 'granted', scope: 'research' },
  checks: [{ name: 'range', passed: true }, { name: 'units', passed: false }],
  sources: [{ name: 'ehr', agrees: true }],
  history: [{ at: '2024-05-01T10:00:00Z', hash: `sha256:${'ab'.repeat(32)}` }],
});

const score = (key: string | null, body: unknown = cleanRecord()) => call(server.url, 'POST', '/api/v1/score', { key, body });

describe('sandbox keys', () => {
  it('issues one key per e-mail address (case-insensitive): 201, then 409', async () => {
    const email = freshEmail();
    const res = await call(server.url, 'POST', '/api/v1/keys', { key: null, body: { email: `  ${email.toUpperCase()} ` } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ key: expect.stringMatching(/^vsk_[A-Za-z0-9_-]{43}$/), email, limit: 100, remaining: 100 });
    const again = await call(server.url, 'POST', '/api/v1/keys', { key: null, body: { email } });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('conflict');
  });

  it('keeps only the SHA-256 of a key in the data dir', async () => {
    const key = await issueKey();
    const bytes = Buffer.concat(dataFiles().map((file) => readFileSync(join(server.dataDir, file))));
    expect(bytes.includes(hashKey(key))).toBe(true);
    expect(bytes.includes(key.slice(4))).toBe(false);
  });

  it('answers 400 naming the field for a malformed address or body', async () => {
    for (const body of [{ email: 'not-an-address' }, { email: 'a@' }, { email: 'a b@example.com' }, {}, { email: 'x@example.com', extra: 1 }]) {
      const res = await call(server.url, 'POST', '/api/v1/keys', { key: null, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.details[0].path).toMatch(/^(email|extra)$/);
    }
  });

  it('gives out exactly one key when the same address asks concurrently', async () => {
    const email = freshEmail();
    const answers = await Promise.all(
      [email, email.toUpperCase(), email, email, email].map((e) => call(server.url, 'POST', '/api/v1/keys', { key: null, body: { email: e } })),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409, 409]);
  });
});

describe('POST /api/v1/score', () => {
  it('answers 401 without a key, with another scheme, a malformed key or an unknown key', async () => {
    const unknown = `vsk_${Buffer.alloc(32, 7).toString('base64url')}`;
    for (const headers of [{}, { authorization: 'Basic abc' }, { authorization: 'Bearer vgl_nope' }, { authorization: `Bearer ${unknown}` }] as Record<string, string>[]) {
      const res = await call(server.url, 'POST', '/api/v1/score', { key: null, headers, body: cleanRecord() });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    }
  });

  it('returns the full 2.11 sidecar and counts the use', async () => {
    const key = await issueKey();
    const record = cleanRecord();
    const res = await score(key, record);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-sandbox-remaining')).toBe('99');
    expect(res.headers.get('x-sandbox-limit')).toBe('100');
    const s = res.body;
    expect(Object.keys(s)).toEqual(['sidecar_id', 'record_id', 'score', 'tier', 'dimensions', 'flags', 'audit_hash', 'applied_weights', 'rubric_version', 'scored_on']);
    expect(s.sidecar_id).toMatch(/^sc_[A-Za-z0-9_-]{22}$/);
    expect(s.record_id).toBe('rec-2024-0001');
    expect(Number.isInteger(s.score) && s.score >= 0 && s.score <= 100).toBe(true);
    expect(['gold', 'silver', 'bronze', 'unrated']).toContain(s.tier);
    expect(Object.keys(s.dimensions)).toEqual(['provenance', 'consent', 'recency', 'quality', 'concordance', 'validation', 'breadth', 'stability']);
    expect(s.dimensions.provenance).toEqual({ score: 1, source: 'registry-a', vintage: today() });
    for (const [name, value] of Object.entries(s.dimensions)) {
      if (name !== 'provenance') expect(typeof value === 'number' && value >= 0 && value <= 1, name).toBe(true);
    }
    expect(s.flags.length).toBeGreaterThan(0);
    for (const flag of s.flags) expect(Object.keys(flag)).toEqual(['dimension', 'code', 'message', 'deduction']);
    expect(s.flags.map((f: { code: string }) => f.code)).toEqual(expect.arrayContaining(['check_failed', 'few_checks', 'few_sources', 'narrow']));
    expect(s.applied_weights).toEqual(RUBRIC_V1.weights);
    expect(Object.values<number>(s.applied_weights).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
    expect(s.rubric_version).toBe(RUBRIC_V1.rubric_version);
    expect(s.scored_on).toBe(today());
    const digest = createHash('sha256').update(canonicalize({ record, weights: s.applied_weights, rubric_version: s.rubric_version })).digest('hex');
    expect(s.audit_hash).toBe(`sha256:${digest}`);
    const poorer = await score(key, { ...record, consent: { status: 'revoked' }, sources: [{ name: 'ehr', agrees: false }] });
    expect(poorer.body.score).toBeLessThan(s.score);
    expect(poorer.body.sidecar_id).not.toBe(s.sidecar_id);
  });

  it('refuses a record with personal health information with 422 naming each field, uncounted and unstored', async () => {
    const key = await issueKey();
    const record = { ...cleanRecord(), fields: { patient_name: 'Jane Roe', hba1c: 6.1, note: 'call 555-123-4567', contact: { e_mail: 'jane@example.org' } } };
    const res = await score(key, record);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('phi_refused');
    expect(res.body.error.message).toContain('fields.patient_name');
    expect(res.body.error.details.map((d: { path: string }) => d.path)).toEqual(['fields.patient_name', 'fields.note', 'fields.contact.e_mail']);
    expect(res.text).not.toContain('Jane Roe');
    expect(res.text).not.toContain('555-123-4567');
    const bad = await score(key, { ...cleanRecord(), vintage: '2024-02-30' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details[0].path).toBe('vintage');
    const future = await score(key, { ...cleanRecord(), vintage: '2999-01-01' });
    expect(future.status).toBe(400);
    const ok = await score(key);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-sandbox-remaining')).toBe('99');
    // Nothing of the refused record reached the data dir (the scored request after it was committed).
    for (const file of dataFiles()) {
      const bytes = readFileSync(join(server.dataDir, file));
      expect(bytes.includes('Jane Roe'), file).toBe(false);
      expect(bytes.includes('555-123-4567'), file).toBe(false);
    }
  });

  it('refuses a __proto__ key anywhere in the body with 400 naming its path, uncounted', async () => {
    // Raw text: JSON.stringify of an object literal would not send the key. zod would drop it, so
    // a scored record would escape the PHI check and differ from the hashed body as sent.
    const key = await issueKey();
    const clean = JSON.stringify(cleanRecord());
    const cases: [string, string][] = [
      [clean.replace('"fields":{', '"fields":{"__proto__":{"patient_name":"Jane Roe"},'), 'fields.__proto__'],
      [clean.replace('"hba1c":6.1', '"hba1c":{"__proto__":{"x":1}}'), 'fields.hba1c.__proto__'],
      [clean.replace('{"name":"units"', '{"__proto__":null,"name":"units"'), 'checks.1.__proto__'],
      [clean.replace('{"record_id"', '{"__proto__":{},"record_id"'), '__proto__'],
    ];
    for (const [raw, path] of cases) {
      expect(raw).toContain('__proto__');
      const res = await call(server.url, 'POST', '/api/v1/score', { key, raw });
      expect(res.status, path).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.details).toEqual([{ path, message: expect.stringContaining('__proto__') }]);
      expect(res.text).not.toContain('Jane Roe');
    }
    const ok = await score(key);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-sandbox-remaining')).toBe('99');
  });

  it('allows exactly 100 scorings: the 101st answers 429 without a sidecar or Retry-After', async () => {
    const key = await issueKey();
    for (let i = 1; i <= 100; i++) {
      const res = await score(key);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-sandbox-remaining')).toBe(String(100 - i));
    }
    for (const body of [cleanRecord(), { ...cleanRecord(), fields: { ssn: '123-45-6789' } }]) {
      const refused = await score(key, body);
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe('quota_exceeded');
      expect(refused.body.error.message).toMatch(/do not reset/);
      expect(refused.body.sidecar_id).toBeUndefined();
      expect(refused.headers.get('retry-after')).toBeNull();
    }
  });

  it('gives the last use to exactly one of several concurrent requests', async () => {
    const key = await issueKey();
    for (let i = 0; i < 99; i++) expect((await score(key)).status).toBe(200);
    const answers = await Promise.all(Array.from({ length: 8 }, () => score(key)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 429, 429, 429, 429, 429, 429, 429]);
    expect((await score(key)).status).toBe(429);
  });

  it('keeps use counts across a restart', async () => {
    const key = await issueKey();
    expect((await score(key)).status).toBe(200);
    await server.close();
    server = await start({}, server.dataDir);
    const after = await score(key);
    expect(after.status).toBe(200);
    expect(after.headers.get('x-sandbox-remaining')).toBe('98');
  });
});
