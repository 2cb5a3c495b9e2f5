import type { Scope } from '../domain/schemas.js';

export interface OrgRecord {
  slug: string;
  created_at: string;
  /** A plan name of src/domain/billing.ts; `free` by default. */
  plan: string;
  billing_email?: string | null;
}

/** A key as stored: only the SHA-256 of the secret, never the secret. */
export interface KeyRecord {
  id: string;
  /** hex SHA-256 of the full key text */
  hash: string;
  org: string;
  scopes: Scope[];
  name: string | null;
  created_at: string;
  /** Set once the key is revoked (`vigil keys revoke`): it authenticates nothing from then on. */
  revoked_at?: string | null;
}

/**
 * Orgs and API keys. Shared with the CLI, which may write while a server runs on the same data
 * dir (or the same cluster): reads always go to the store, so a key created elsewhere is seen as
 * soon as the store holds it (LMDB: at once; KV: once its watch delivers it, milliseconds).
 * Writes resolve once durable, and the writing store reads them back at once.
 */
export interface RegistryStore {
  getOrg(slug: string): OrgRecord | undefined;
  putOrg(org: OrgRecord): Promise<void>;
  listOrgs(): OrgRecord[];
  getKey(hash: string): KeyRecord | undefined;
  putKey(key: KeyRecord): Promise<void>;
  /** Every key, revoked ones included (the CLI finds a key by id). */
  listKeys(): KeyRecord[];
  /**
   * When the key with this id was last used (ISO time), as last recorded. Kept apart from the key
   * records, so that recording a use never races a revocation.
   */
  keyUsedAt(id: string): string | undefined;
  /** Records uses (a later time than the one stored, or the first). */
  putKeyUses(uses: readonly { id: string; at: string }[]): Promise<void>;
  isEmpty(): boolean;
}
