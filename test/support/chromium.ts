import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

/** The Chromium the page tests drive (playwright-core brings no browser of its own). */
export const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';

/**
 * Whether Chromium is here. Missing, the browser suites are skipped with a loud warning, except
 * where it is required (VIGIL_REQUIRE_CHROMIUM=1, as .ci/run sets, or CI=true): a skipped browser
 * test must not pass unseen.
 */
export function haveChromium(): boolean {
  if (existsSync(CHROMIUM)) return true;
  console.warn(`\n!!! ${CHROMIUM} not found: the browser tests of the public page are SKIPPED (apt-get install chromium)\n`);
  if (process.env.VIGIL_REQUIRE_CHROMIUM === '1' || process.env.CI === 'true') throw new Error(`chromium is required here (${CHROMIUM} missing; VIGIL_REQUIRE_CHROMIUM or CI is set)`);
  return false;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/**
 * Everything a page complains of, as it happens: console errors and warnings (Chromium reports a
 * CSP or Trusted Types violation there) and uncaught exceptions. A page that works leaves it empty.
 */
export function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') problems.push(`console ${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));
  return problems;
}
