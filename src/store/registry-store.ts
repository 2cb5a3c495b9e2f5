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
}

/**
 * Orgs and API keys. Shared with the CLI, which may write while a server runs on the same data
 * dir: reads always go to the store, so a key created elsewhere is seen at once.
 * Writes resolve once durable.
 */
export interface RegistryStore {
  getOrg(slug: string): OrgRecord | undefined;
  putOrg(org: OrgRecord): Promise<void>;
  listOrgs(): OrgRecord[];
  getKey(hash: string): KeyRecord | undefined;
  putKey(key: KeyRecord): Promise<void>;
  isEmpty(): boolean;
}
