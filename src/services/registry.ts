import { randomBytes } from 'node:crypto';
import { DEFAULT_PLAN, PLANS, planNamed, type Plan } from '../domain/billing.js';
import { formatKey, hashKey, sameDigest } from '../domain/keys.js';
import { Scope, orgSlug } from '../domain/schemas.js';
import { VigilError } from '../errors.js';
import type { KeyRecord, OrgRecord, RegistryStore } from '../store/registry-store.js';

const MAX_CACHED_KEYS = 10_000;

/** A key as the admin routes and the CLI list it: never its secret or its digest. */
export interface KeyView {
  id: string;
  name: string | null;
  scopes: Scope[];
  created_at: string;
  /** The last use this node saw, or the last any node recorded (uses are recorded a minute at a time), whichever is later; null if never used. */
  last_used_at: string | null;
  revoked_at: string | null;
}

/** How often uses are written to the store; a use shows in last_used_at within this. */
export const USE_FLUSH_MS = 60_000;

export interface CreatedKey {
  id: string;
  key: string;
  org: string;
  scopes: Scope[];
  name: string | null;
}

/** What `setPlan` did: the org as it now is, and its plan before (null: the org was created). */
export interface PlanChange {
  org: OrgRecord;
  previousPlan: string | null;
}

/**
 * Orgs and keys: creation (CLI, admin route, bootstrap) and authentication. Keys are stored only
 * as SHA-256 digests. Keys already seen are cached in memory (their hash, so the hot path skips
 * hashing), and every request reads the key's record from the store (a synchronous read of LMDB
 * or of the KV mirror), so a key created or revoked by the CLI against a running server, or on
 * another node, takes effect as soon as the store holds the change.
 */
export class Registry {
  /** The digests of keys seen, by their text: the hot path skips hashing. Bounded. */
  private readonly byText = new Map<string, string>();
  /** Keys used since the last flush, by id: when last (ms). */
  private readonly used = new Map<string, number>();

  constructor(
    private readonly store: RegistryStore,
    private readonly now: () => Date = () => new Date(),
  ) {}

  getOrg(slug: string): OrgRecord | undefined {
    return this.store.getOrg(slug);
  }

  async ensureOrg(slug: string): Promise<OrgRecord> {
    refuseBadSlug(slug);
    const existing = this.store.getOrg(slug);
    if (existing !== undefined) return existing;
    const org: OrgRecord = { slug, created_at: this.now().toISOString(), plan: 'free' };
    await this.store.putOrg(org);
    return org;
  }

  /** The org's plan in force (read from the store, so a change by the CLI applies at once). */
  planOf(slug: string): Plan {
    return planNamed(this.store.getOrg(slug)?.plan ?? DEFAULT_PLAN) ?? PLANS.free;
  }

  /**
   * Sets an org's plan (and billing e-mail, when given), creating the org if it does not exist;
   * the writers read it per batch.
   */
  async setPlan(slug: string, plan: string, billingEmail?: string | null): Promise<PlanChange> {
    refuseBadSlug(slug);
    if (planNamed(plan) === undefined) {
      throw new VigilError('validation_failed', `unknown plan ${JSON.stringify(plan)}; plans: ${Object.keys(PLANS).join(', ')}`);
    }
    const existing = this.store.getOrg(slug);
    const org: OrgRecord = { ...(existing ?? { slug, created_at: this.now().toISOString() }), plan, ...(billingEmail === undefined ? {} : { billing_email: billingEmail }) };
    await this.store.putOrg(org);
    return { org, previousPlan: existing?.plan ?? null };
  }

  async createKey(org: string, scopes: readonly Scope[], name: string | null): Promise<CreatedKey> {
    return this.storeKey(formatKey(randomBytes(32)), org, scopes, name);
  }

  /** Idempotently ensures `key` exists in `org` with every scope (VIGIL_BOOTSTRAP_*). */
  async ensureKey(org: string, key: string, name: string): Promise<void> {
    await this.ensureOrg(org);
    const existing = this.store.getKey(hashKey(key));
    if (existing === undefined) {
      await this.storeKey(key, org, Scope, name);
      return;
    }
    if (existing.org !== org) throw new VigilError('conflict', `the bootstrap key already belongs to org ${existing.org}`);
  }

  /** The key behind an Authorization header value, or a 401 error. */
  authenticate(authorization: string): KeyRecord {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (match === null) {
      throw new VigilError('unauthorized', authorization === '' ? 'missing API key: send Authorization: Bearer <key>' : 'malformed Authorization header: expected Bearer <key>');
    }
    const text = match[1]!;
    let digest = this.byText.get(text);
    if (digest === undefined) {
      digest = hashKey(text);
      if (this.byText.size >= MAX_CACHED_KEYS) this.byText.clear();
      this.byText.set(text, digest);
    }
    const record = this.store.getKey(digest);
    if (record === undefined || !sameDigest(record.hash, digest)) throw new VigilError('unauthorized', 'unknown API key');
    if (record.revoked_at != null) throw new VigilError('unauthorized', 'this API key was revoked');
    this.used.set(record.id, Date.now());
    return record;
  }

  /**
   * The key's record as the store holds it now, or undefined once it is revoked (or gone): what a
   * long-lived connection authenticated once checks again (a synchronous read, as on every request).
   */
  current(key: Pick<KeyRecord, 'id' | 'hash'>): KeyRecord | undefined {
    const record = this.store.getKey(key.hash);
    return record === undefined || record.id !== key.id || record.revoked_at != null ? undefined : record;
  }

  /** The org's keys, oldest first, as the admin routes show them. */
  listKeys(org: string): KeyView[] {
    return this.store
      .listKeys()
      .filter((k) => k.org === org)
      .sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : 1))
      .map((k) => this.view(k));
  }

  view(record: KeyRecord): KeyView {
    const mine = this.used.get(record.id);
    const stored = this.store.keyUsedAt(record.id) ?? null;
    const recent = mine === undefined ? null : new Date(mine).toISOString();
    return {
      id: record.id,
      name: record.name,
      scopes: record.scopes,
      created_at: record.created_at,
      last_used_at: recent !== null && (stored === null || recent > stored) ? recent : stored,
      revoked_at: record.revoked_at ?? null,
    };
  }

  /** Revokes a key of `org` (404 for another org's or an unknown id). */
  async revokeOwnKey(org: string, id: string): Promise<KeyView> {
    const record = this.store.listKeys().find((k) => k.id === id && k.org === org);
    if (record === undefined) throw new VigilError('not_found', `key ${id} not found`);
    return this.view(await this.revokeKey(id));
  }

  /**
   * Writes the uses seen since the last flush to the store (every USE_FLUSH_MS, and on close): a
   * request never waits on it. A failed write keeps them for the next.
   */
  async flushUses(): Promise<void> {
    if (this.used.size === 0) return;
    const uses = [...this.used].map(([id, ms]) => ({ id, at: new Date(ms).toISOString() }));
    this.used.clear();
    try {
      await this.store.putKeyUses(uses);
    } catch (error) {
      for (const { id, at } of uses) if (!this.used.has(id)) this.used.set(id, Date.parse(at));
      throw error;
    }
  }

  /** Revokes the key with this id (`key_…`): every node refuses it once its store holds the change. */
  async revokeKey(id: string): Promise<KeyRecord> {
    const record = this.store.listKeys().find((k) => k.id === id);
    if (record === undefined) throw new VigilError('not_found', `key ${id} not found`);
    if (record.revoked_at != null) return record;
    const revoked: KeyRecord = { ...record, revoked_at: this.now().toISOString() };
    await this.store.putKey(revoked);
    return revoked;
  }

  private async storeKey(key: string, org: string, scopes: readonly Scope[], name: string | null): Promise<CreatedKey> {
    const record: KeyRecord = {
      id: 'key_' + randomBytes(8).toString('hex'),
      hash: hashKey(key),
      org,
      scopes: [...scopes],
      name,
      created_at: this.now().toISOString(),
    };
    await this.store.putKey(record);
    return { id: record.id, key, org, scopes: record.scopes, name };
  }
}

function refuseBadSlug(slug: string): void {
  if (!orgSlug.safeParse(slug).success) {
    throw new VigilError('validation_failed', `invalid org slug ${JSON.stringify(slug)}: 1-64 lowercase letters, digits or inner hyphens`);
  }
}
