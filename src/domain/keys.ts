import { createHash, timingSafeEqual } from 'node:crypto';

/** API key text: `vgl_` followed by 43 url-safe characters (32 random bytes, base64url). */
export const KEY_PREFIX = 'vgl_';

export function formatKey(random32: Buffer): string {
  return KEY_PREFIX + random32.toString('base64url');
}

export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** Constant-time comparison of two hex digests of equal length. */
export function sameDigest(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}
