import type { Database } from 'lmdb';
import type { LmdbEnv } from '../store/lmdb-env.js';
import type { IssueOutcome, ScoringKeyRecord, ScoringKeyStore, UseOutcome } from './key-store.js';

/**
 * LMDB adapter of ScoringKeyStore: two named tables of the service's environment, keys by hash and
 * key hash by e-mail. Each write is an lmdb-js transaction callback, which runs inside LMDB's single
 * write transaction (exclusive across processes too), so its read-check-write cannot interleave with
 * another; the promise resolves after the commit and the store's flush.
 */
export class LmdbScoringKeyStore implements ScoringKeyStore {
  private readonly keys: Database<ScoringKeyRecord, string>;
  private readonly emails: Database<string, string>;

  constructor(private readonly store: LmdbEnv) {
    this.keys = store.table<string, ScoringKeyRecord>('scoring_keys');
    this.emails = store.table<string, string>('scoring_key_emails');
  }

  get(hash: string): ScoringKeyRecord | undefined {
    return this.keys.get(hash);
  }

  async issue(key: ScoringKeyRecord): Promise<IssueOutcome> {
    const outcome = await this.store.write(() => this.keys.transaction((): IssueOutcome => {
      if (this.emails.get(key.email) !== undefined) return { ok: false, reason: 'email_taken' };
      void this.emails.put(key.email, key.hash);
      void this.keys.put(key.hash, key);
      return { ok: true };
    }));
    if (outcome.ok) await this.store.flushed();
    return outcome;
  }

  async use(hash: string): Promise<UseOutcome> {
    const outcome = await this.store.write(() => this.keys.transaction((): UseOutcome => {
      const key = this.keys.get(hash);
      if (key === undefined) return { ok: false, reason: 'unknown_key' };
      if (key.used >= key.limit) return { ok: false, reason: 'exhausted' };
      const used = key.used + 1;
      void this.keys.put(hash, { ...key, used });
      return { ok: true, used, remaining: key.limit - used };
    }));
    if (outcome.ok) await this.store.flushed();
    return outcome;
  }
}
