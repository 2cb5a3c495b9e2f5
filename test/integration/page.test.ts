import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, removeDir, startServer, tempDir, type TestServer } from '../support/server.js';

const HOSTILE = `<img src=x onerror="document.title='pwned'"><script>window.__pwned=1</script>Eve "the" Bot`;
const HOSTILE_URL = 'https://evil.example/?q="><script>window.__pwned=2</script>';
const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';

let server: TestServer;
beforeAll(async () => {
  server = await startServer({ VIGIL_PUBLIC_RATE_LIMIT: '1000' });
  await call(server.url, 'POST', '/agents/', { body: { agent_id: 'eve', name: HOSTILE } });
  await call(server.url, 'PATCH', '/admin/agents/eve', {
    body: { public: true, public_links: [{ kind: 'website', url: HOSTILE_URL }, { kind: 'code_host', url: 'https://git.example/eve' }] },
  });
  for (let i = 0; i < 3; i++) await call(server.url, 'POST', '/events/', { body: { agent_id: 'eve', event_type: 'output_generated', payload: {}, dti: 0.99 } });
  await call(server.url, 'POST', '/agents/', { body: { agent_id: 'quiet', name: 'Quiet' } });
});
afterAll(async () => {
  await server.close();
  removeDir(server.dataDir);
});

describe('GET /a/{org}/{agent_id} over HTTP', () => {
  it('serves escaped HTML with the record, the links and the plain words, under a strict CSP', async () => {
    const res = await call(server.url, 'GET', '/a/acme/eve', { key: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(res.text).not.toContain('<script>');
    expect(res.text).not.toContain('<img src=x');
    expect(res.text).toContain('&lt;img src=x onerror=&quot;');
    expect(res.text).toContain('rel="nofollow noopener noreferrer"');
    expect(res.text).toContain('does not prove who operates the agent');
    const record = (await call(server.url, 'GET', '/public/agents/acme/eve', { key: null })).body;
    expect(res.text).toContain(record.ledger_head);
    expect(res.text).toContain(record.verify_url);
  });

  it('answers the same 404 page for a private, unknown or foreign agent', async () => {
    const pages = await Promise.all(['/a/acme/quiet', '/a/acme/nobody', '/a/other/eve'].map((p) => call(server.url, 'GET', p, { key: null })));
    expect(pages.map((p) => p.status)).toEqual([404, 404, 404]);
    expect(new Set(pages.map((p) => p.text)).size).toBe(1);
  });

  it('serves the verification guide with the hash rule, the commands and the prefix check', async () => {
    const res = await call(server.url, 'GET', '/a/acme/eve/verify', { key: null });
    expect(res.status).toBe(200);
    expect(res.text).toContain('JCS = RFC 8785');
    expect(res.text).toContain('/audit/export');
    expect(res.text).toContain('npm run vigil -- verify ledger.jsonl');
    expect(res.text).toContain('/audit/eve/verify?head=');
    expect(res.text).not.toContain('<script>');
  });
});

const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) {
  console.warn(`\n!!! ${CHROMIUM} not found: the browser test of the public page is SKIPPED (apt-get install chromium)\n`);
  if (process.env.CI === 'true') throw new Error(`chromium is required in CI (${CHROMIUM} missing)`);
}

describe.skipIf(!haveChromium)('the public page in a real browser', () => {
  let browser: Browser;
  const shots = tempDir('vigil-shots-');
  beforeAll(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    if (process.env.VIGIL_KEEP_SHOTS === undefined) removeDir(shots);
    else console.log(`screenshots kept in ${shots}`);
  });

  it('shows the record and renders a hostile name and link as text, running no script', async () => {
    const page = await browser.newPage();
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    const response = await page.goto(`${server.url}/a/acme/eve`);
    expect(response?.status()).toBe(200);
    expect(await page.locator('#name').innerText()).toBe(HOSTILE);
    expect(await page.locator('#gate').innerText()).toMatch(/hold|alert|collapse/);
    expect(await page.locator('#records').innerText()).toBe('5');
    const link = page.locator('#links a').first();
    expect(await link.getAttribute('href')).toBe(HOSTILE_URL);
    expect(await link.getAttribute('rel')).toContain('nofollow');
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('script').count()).toBe(0);
    expect(await page.evaluate('typeof window.__pwned')).toBe('undefined');
    expect(await page.title()).not.toBe('pwned');
    expect(dialogs).toEqual([]);
    const shot = join(shots, 'agent-page.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(existsSync(shot)).toBe(true);
    await page.close();
  });
});
