/**
 * One token of a KV key. NATS KV keys allow `[-/_=.a-zA-Z0-9]`, and `.` separates tokens, so a
 * text of `[A-Za-z0-9_-]` (org slugs, hex hashes) is its own token, readable in `nats kv ls`;
 * any other text (an e-mail address, an agent_id with `.` or `:`) is `=` and its UTF-8 in
 * base64url, unpadded. Plain tokens never hold `=`, so the mapping is one to one.
 */
const PLAIN = /^[A-Za-z0-9_-]+$/;

export function kvToken(text: string): string {
  return PLAIN.test(text) ? text : '=' + Buffer.from(text, 'utf8').toString('base64url');
}

/** The text `kvToken` made `token` from. */
export function fromKvToken(token: string): string {
  return token.startsWith('=') ? Buffer.from(token.slice(1), 'base64url').toString('utf8') : token;
}
