import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveChromium, launchChromium, watchProblems } from '../support/chromium.js';
import { call, removeDir, startServer, type TestServer } from '../support/server.js';

// DESIGN §10 "In the browser": the agent page checks the org's checkpoint signature with WebCrypto,
// remembers the checkpoint it saw and checks a consistency proof from it on the next visit; a bad
// signature or proof is a warning that leaves what it remembers as it was. One browser profile
// (context) plays one reader across visits.

const PAGE = '/a/acme/lena';
const DEADLINE_MS = 10_000;

let server: TestServer;
beforeAll(async () => {
  server = await startServer({ VIGIL_PUBLIC_RATE_LIMIT: '10000' });
  await call(server.url, 'POST', '/agents/', { body: { agent_id: 'lena', name: 'Lena' } });
  await call(server.url, 'PATCH', '/admin/agents/lena', { body: { public: true } });
  await record();
});
afterAll(async () => {
  await server?.close();
  if (server !== undefined) removeDir(server.dataDir);
});

async function record(): Promise<void> {
  const res = await call(server.url, 'POST', '/events/', { body: { agent_id: 'lena', event_type: 'output_generated', payload: {} } });
  expect(res.status, res.text).toBeLessThan(300);
}

/** The org's latest signed checkpoint, read as the page reads it. */
async function checkpoint(): Promise<{ origin: string; size: number; root: string } | null> {
  const res = await call(server.url, 'GET', '/public/checkpoints/acme', { key: null });
  if (res.status !== 200) return null;
  const [origin, size, root] = res.text.split('\n') as [string, string, string];
  return { origin, size: Number(size), root };
}

/** Records one more event and waits for a checkpoint that covers it (one is signed each second). */
async function grow(): Promise<number> {
  const before = (await checkpoint())?.size ?? 0;
  await record();
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const size = (await checkpoint())?.size ?? 0;
    if (size > before) return size;
    if (Date.now() > deadline) throw new Error(`no checkpoint above ${before} within ${DEADLINE_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface Shown {
  verdict: string | null;
  text: string;
  warning: boolean;
  role: string | null;
}

/** Opens the page and waits for the log check's outcome. */
async function visit(page: Page): Promise<Shown> {
  const response = await page.goto(`${server.url}${PAGE}`);
  expect(response?.status()).toBe(200);
  const status = page.locator('#log-status:not([data-verdict="checking"])');
  await status.waitFor({ timeout: DEADLINE_MS });
  return {
    verdict: await status.getAttribute('data-verdict'),
    text: await status.innerText(),
    warning: (await status.getAttribute('class'))?.split(' ').includes('log-warning') ?? false,
    role: await status.getAttribute('role'),
  };
}

/** The page warned: the verdict, shown as an alert, saying `words`. */
function expectWarning(shown: Shown, verdict: string, words: string): void {
  expect(shown.verdict).toBe(verdict);
  expect(shown.warning).toBe(true);
  expect(shown.role).toBe('alert');
  expect(shown.text).toContain(words);
}

describe.skipIf(!haveChromium())('the public page checks the transparency log in a real browser', () => {
  let browser: Browser;
  let reader: BrowserContext;
  let page: Page;
  let problems: string[];
  let origin: string;
  // Kept under the site and the org (never under the name the server gives its log).
  const storageKey = (): string => `vigil-log:${server.url}/acme`;
  /** The page's localStorage entry for the log, as stored (a string; null if none). */
  const stored = (): Promise<string | null> => page.evaluate(`localStorage.getItem(${JSON.stringify(storageKey())})`);
  const remembered = async (): Promise<{ origin: string; key: string; size: number; root: string; seen_at: string } | null> => JSON.parse((await stored()) ?? 'null');
  /** As the page writes a date: in the reader's locale. */
  const local = (iso: string): Promise<string> =>
    page.evaluate((at) => new Date(at).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }), iso);

  beforeAll(async () => {
    browser = await launchChromium();
    reader = await browser.newContext();
    page = await reader.newPage();
    problems = watchProblems(page);
    const deadline = Date.now() + DEADLINE_MS;
    let first = await checkpoint();
    while (first === null || first.size === 0) {
      if (Date.now() > deadline) throw new Error('no checkpoint of the seeded records');
      await new Promise((resolve) => setTimeout(resolve, 100));
      first = await checkpoint();
    }
    origin = first.origin;
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('first visit: checks the signature, says it will compare next time, and remembers the checkpoint', async () => {
    const latest = (await checkpoint())!;
    const shown = await visit(page);
    expect(shown.verdict).toBe('first');
    expect(shown.warning).toBe(false);
    expect(shown.text).toContain(`Signature checked: this log's checkpoint of ${latest.size} record`);
    expect(shown.text).toContain('is signed by the published log key.');
    expect(shown.text).toContain('will compare the log with it next time');
    const seen = await remembered();
    expect(seen).toMatchObject({ size: latest.size, root: latest.root });
    expect(Date.parse(seen!.seen_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(problems).toEqual([]);
  });

  it('a later visit after more records: proves the log consistent with what was seen, on that date', async () => {
    const before = (await remembered())!;
    const size = await grow();
    const shown = await visit(page);
    expect(shown.verdict).toBe('consistent');
    expect(shown.text).toContain(`Signature checked: this log's checkpoint of ${size} records is signed by the published log key.`);
    expect(shown.text).toContain(`This log is consistent with what you saw on ${await local(before.seen_at)}: nothing recorded before then was changed or removed.`);
    expect((await remembered())?.size).toBe(size);
    // Nothing new: the same checkpoint, compared root for root.
    expect((await visit(page)).verdict).toBe('unchanged');
    expect(problems).toEqual([]);
  });

  it('a checkpoint whose signature was changed: a warning, and the remembered checkpoint is kept', async () => {
    const before = await stored();
    await page.route('**/public/checkpoints/**', async (route) => {
      const response = await route.fetch();
      // One base64 digit of each signature changed, past the 4-byte key id: the signature itself.
      const note = (await response.text()).replace(/^(\u2014 \S+ )(\S+)$/gm, (_m, head: string, sig: string) => `${head}${sig.slice(0, 20)}${sig[20] === 'A' ? 'B' : 'A'}${sig.slice(21)}`);
      await route.fulfill({ response, body: note });
    });
    try {
      const shown = await visit(page);
      expectWarning(shown, 'signature', 'not signed by the published log key');
      expect(await stored()).toBe(before);
    } finally {
      await page.unroute('**/public/checkpoints/**');
    }
    expect(problems).toEqual([]);
  });

  it('a consistency proof whose hashes were changed: a warning, and the remembered checkpoint is kept', async () => {
    const before = await stored();
    const seen = (await remembered())!;
    await grow();
    let asked = 0;
    await page.route('**/public/proof/**', async (route) => {
      asked++;
      const response = await route.fetch();
      const proof = (await response.json()) as { hashes: string[] };
      proof.hashes = proof.hashes.map((h) => (h[0] === '0' ? '1' : '0') + h.slice(1));
      await route.fulfill({ response, json: proof });
    });
    try {
      const shown = await visit(page);
      expect(asked).toBe(1);
      expectWarning(shown, 'proof-fails', `Warning: this log is not consistent with what you saw on ${await local(seen.seen_at)}`);
      expect(shown.text).toContain('This browser keeps the checkpoint you saw then.');
      expect(await stored()).toBe(before);
    } finally {
      await page.unroute('**/public/proof/**');
    }
    // The true proof, from the same remembered checkpoint: consistent, and now remembered.
    const shown = await visit(page);
    expect(shown.verdict).toBe('consistent');
    expect(shown.warning).toBe(false);
    expect(shown.role).toBeNull();
    expect((await remembered())!.size).toBeGreaterThan(seen.size);
    expect(problems).toEqual([]);
  });

  it('a log smaller than the one remembered: a fork warning, the remembered one kept', async () => {
    const latest = (await checkpoint())!;
    const kept = (await remembered())!;
    const bigger = JSON.stringify({ ...kept, size: latest.size + 1000, root: latest.root, seen_at: new Date().toISOString() });
    await page.evaluate(`localStorage.setItem(${JSON.stringify(storageKey())}, ${JSON.stringify(bigger)})`);
    const shown = await visit(page);
    expect(shown.verdict).toBe('shrunk');
    expect(shown.warning).toBe(true);
    expect(shown.text).toContain(`fewer than the ${latest.size + 1000} you saw`);
    expect(await stored()).toBe(bigger);
    expect(problems).toEqual([]);
  });

  it('a log that renamed itself or changed its key since: a warning, the remembered one kept', async () => {
    const kept = (await remembered())!;
    expect(kept.origin).toBe(origin);
    for (const changed of [{ origin: 'elsewhere.example/vigil/acme' }, { key: 'elsewhere.example/vigil+00000000+AQ==' }]) {
      const entry = JSON.stringify({ ...kept, ...changed });
      await page.evaluate(`localStorage.setItem(${JSON.stringify(storageKey())}, ${JSON.stringify(entry)})`);
      const shown = await visit(page);
      expectWarning(shown, 'renamed', 'cannot be compared with what you saw');
      expect(await stored()).toBe(entry);
    }
    await page.evaluate(`localStorage.setItem(${JSON.stringify(storageKey())}, ${JSON.stringify(JSON.stringify(kept))})`);
    expect(problems).toEqual([]);
  });

  it('the problem watcher sees a CSP violation (so that its silence above means something)', async () => {
    const other = await reader.newPage();
    const seen = watchProblems(other);
    await other.route(`**${PAGE}`, async (route) => {
      const response = await route.fetch();
      const html = (await response.text()).replace('</body>', '<script>window.__inline = 1</script></body>');
      await route.fulfill({ response, body: html });
    });
    await other.goto(`${server.url}${PAGE}`);
    await other.locator('#log-status:not([data-verdict="checking"])').waitFor({ timeout: DEADLINE_MS });
    expect(await other.evaluate('typeof window.__inline')).toBe('undefined');
    expect(seen.join('\n')).toContain('Content Security Policy');
    await other.close();
  });
});
