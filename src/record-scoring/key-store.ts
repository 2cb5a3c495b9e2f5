/** A record-scoring sandbox key as stored: only the SHA-256 of the key text, never the text. */
export interface ScoringKeyRecord {
  /** hex SHA-256 of the full key text */
  hash: string;
  /** Normalised (trimmed, lower case); one key per address. */
  email: string;
  /** Scoring requests the key allows in all; sandbox keys never reset. */
  limit: number;
  used: number;
  created_at: string;
}

export type IssueOutcome = { ok: true } | { ok: false; reason: 'email_taken' };

export type UseOutcome =
  | { ok: true; used: number; remaining: number }
  | { ok: false; reason: 'unknown_key' | 'exhausted' };

/**
 * Sandbox keys of the record-scoring interface and their use counts.
 * Both writes are atomic read-check-write transactions: of two concurrent issues for one address
 * exactly one succeeds, and of concurrent uses of a key's last request exactly one gets it (also
 * across processes sharing the data dir, or nodes sharing the cluster). Writes resolve once durable; a refused write changes nothing.
 */
export interface ScoringKeyStore {
  get(hash: string): ScoringKeyRecord | undefined;
  /** Stores a new key unless its e-mail already holds one. */
  issue(key: ScoringKeyRecord): Promise<IssueOutcome>;
  /** Takes one request from the key's allowance, if any is left. */
  use(hash: string): Promise<UseOutcome>;
}
