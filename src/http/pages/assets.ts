import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** The public page's one script (plain browser JavaScript, no build step), read once at start. */
export const LOG_CHECK_JS = readFileSync(new URL('./log-check.js', import.meta.url), 'utf8');

export const LOG_CHECK_PATH = '/assets/log-check.js';

/**
 * Its address in a page, versioned by its content: a browser may cache it for long, and a page
 * of a new release still gets the new script.
 */
export const LOG_CHECK_SRC = `${LOG_CHECK_PATH}?v=${createHash('sha256').update(LOG_CHECK_JS).digest('hex').slice(0, 12)}`;

export const ASSET_HEADERS = {
  'cache-control': 'public, max-age=604800',
  'x-content-type-options': 'nosniff',
};
