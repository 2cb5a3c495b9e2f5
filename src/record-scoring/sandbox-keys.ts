/** Record-scoring sandbox keys: `vsk_` followed by 43 url-safe characters (32 random bytes, base64url). */
export const SANDBOX_KEY_PREFIX = 'vsk_';
/** Scoring requests a sandbox key allows, in all (spec §8): it never resets. */
export const SANDBOX_LIMIT = 100;

const SANDBOX_KEY = /^vsk_[A-Za-z0-9_-]{43}$/;

export function formatSandboxKey(random32: Buffer): string {
  return SANDBOX_KEY_PREFIX + random32.toString('base64url');
}

/** The sandbox key sent as `Authorization: Bearer <key>`, or null when absent or not of the key's form. */
export function bearerSandboxKey(authorization: string): string | null {
  const match = /^Bearer +(\S+) *$/i.exec(authorization);
  return match !== null && SANDBOX_KEY.test(match[1]!) ? match[1]! : null;
}
