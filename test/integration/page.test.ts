import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveChromium, launchChromium, watchProblems } from '../support/chromium.js';
import { call, removeDir, startServer, tempDir, type TestServer } from '../support/server.js';

const HOSTILE = `<img src=x onerror="document.title='pwned'"><script>window.__pwned=1</script>Eve "the" Bot`;
const HOSTILE_URL = 'https://evil.example/?q="><script>window.__pwned=2</script>';
/** The one script tag the agent page carries: its own file, a module, versioned by content. */
const SCRIPT_TAG = /<script type="module" src="(\/assets\/log-check\.js\?v=[0-9a-f]{12})"><\/script>/g;

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
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self';");
    expect(csp).toContain("connect-src 'self';");
    expect(csp).toContain("require-trusted-types-for 'script'");
    expect(csp).not.toContain('unsafe-eval');
    expect(csp.split(';').find((d) => d.trim().startsWith('script-src'))).not.toContain('unsafe-inline');
    expect([...res.text.matchAll(SCRIPT_TAG)]).toHaveLength(1);
    expect(res.text.match(/<script/g)).toHaveLength(1);
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
    // No script there: the strict policy.
    expect(pages[0]!.text).not.toContain('<script');
    expect(pages[0]!.headers.get('content-security-policy')).not.toContain('script-src');
  });

  it('serves the page script as a static file, cacheable, the one the page names', async () => {
    const page = await call(server.url, 'GET', '/a/acme/eve', { key: null });
    const src = [...page.text.matchAll(SCRIPT_TAG)][0]![1]!;
    const res = await call(server.url, 'GET', src, { key: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/javascript; charset=utf-8');
    expect(res.headers.get('cache-control')).toMatch(/^public, max-age=\d{6,}$/);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.text).toContain("crypto.subtle.importKey('raw', key.publicKey, { name: 'Ed25519' }");
    // Plain text into the page, never HTML from a string.
    expect(res.text).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/);
    expect((await call(server.url, 'GET', '/assets/log-check.js', { key: null })).text).toBe(res.text);
  });

  it('serves the verification guide with the hash rule, the commands and the prefix check', async () => {
    const res = await call(server.url, 'GET', '/a/acme/eve/verify', { key: null });
    expect(res.status).toBe(200);
    expect(res.text).toContain('JCS = RFC 8785');
    expect(res.text).toContain('/audit/export');
    expect(res.text).toContain('npm run vigil -- verify ledger.jsonl');
    expect(res.text).toContain('/audit/eve/verify?head=');
    expect(res.text).not.toContain('<script');
    expect(res.headers.get('content-security-policy')).not.toContain('script-src');
  });

  it('guides a reader with no key through the checkpoint and consistency checks, on the public routes', async () => {
    const res = await call(server.url, 'GET', '/a/acme/eve/verify', { key: null });
    const noKey = res.text.slice(res.text.indexOf('<h2>1.'), res.text.indexOf('<h2>3.'));
    expect(noKey).toContain(`${server.url}/public/log-key`);
    expect(noKey).toContain(`${server.url}/public/checkpoints/acme`);
    expect(noKey).toContain(`${server.url}/public/proof/acme/consistency?from=`);
    expect(noKey).toContain('RFC 9162');
    expect(noKey).toContain('npm run vigil -- monitor');
    expect(noKey).toContain('signature');
    expect(noKey).not.toMatch(/Authorization|VIGIL_KEY/);
  });
});

describe.skipIf(!haveChromium())('the public page in a real browser', () => {
  let browser: Browser;
  const shots = tempDir('vigil-shots-');
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    if (process.env.VIGIL_KEEP_SHOTS === undefined) removeDir(shots);
    else console.log(`screenshots kept in ${shots}`);
  });

  it('shows the record and renders a hostile name and link as text, running no script but its own', async () => {
    const page = await browser.newPage();
    const problems = watchProblems(page);
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
    expect(await page.locator('script').count()).toBe(1);
    expect(await page.locator('script').getAttribute('src')).toMatch(/^\/assets\/log-check\.js\?v=/);
    // Its own script ran (the log check), and nothing else did.
    await page.locator('#log-status:not([data-verdict="checking"])').waitFor();
    expect(await page.locator('#log-status').getAttribute('data-verdict')).toBe('first');
    expect(await page.evaluate('typeof window.__pwned')).toBe('undefined');
    expect(await page.title()).not.toBe('pwned');
    expect(dialogs).toEqual([]);
    expect(problems).toEqual([]);
    const shot = join(shots, 'agent-page.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(existsSync(shot)).toBe(true);
    await page.close();
  });

  it("reads plainly: the BII against the pass line, times in the reader's locale, short hashes that copy in full", async () => {
    const context = await browser.newContext({ locale: 'de-DE', timezoneId: 'Asia/Tokyo' });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
    const page = await context.newPage();
    const problems = watchProblems(page);
    await page.goto(`${server.url}/a/acme/eve`);
    const record = (await call(server.url, 'GET', '/public/agents/acme/eve', { key: null })).body;

    expect((await page.locator('#bii').innerText()).trim()).toMatch(/^\d\.\d\d of 1 — an agent passes at 0\.75 or above$/);
    expect(Number(await page.locator('#bii-value').innerText())).toBeCloseTo(Math.floor(record.bii * 100) / 100, 5);
    expect(Number(await page.locator('#bii meter').getAttribute('value'))).toBe(record.bii);

    const time = page.locator('#last-event time');
    expect(await time.getAttribute('datetime')).toBe(record.last_event_at);
    const local = new Date(record.last_event_at).toLocaleString('de-DE', { timeZone: 'Asia/Tokyo', dateStyle: 'medium', timeStyle: 'medium' });
    await expect.poll(() => time.innerText()).toBe(local);
    expect(await time.getAttribute('title')).toBe(record.last_event_at);

    const head = page.locator('#head');
    expect(await head.innerText()).toBe(`${record.ledger_head.slice(0, 8)}…${record.ledger_head.slice(-8)}`);
    expect(await head.getAttribute('data-full')).toBe(record.ledger_head);
    const copy = page.locator('#head + button.copy');
    expect(await copy.getAttribute('aria-label')).toBe('Copy the full ledger head');
    await copy.click();
    await expect.poll(() => copy.innerText()).toBe('Copied');
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(record.ledger_head);
    expect(await page.locator('#policy').getAttribute('data-full')).toBe(record.policy_digest);

    expect(problems).toEqual([]);
    await context.close();
  });
});
