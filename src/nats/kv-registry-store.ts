import type { NatsConnection } from '@nats-io/transport-node';
import type { KeyRecord, OrgRecord, RegistryStore } from '../store/registry-store.js';
import { KvMirror, type KvBucketOptions } from './kv-mirror.js';
import { kvToken } from './kv-key.js';
import { openAll } from './open-all.js';

export interface RegistryBuckets {
  /** Default `vigil_orgs`: an org (its plan and billing e-mail too) under its slug. */
  orgs: string;
  /** Default `vigil_keys`: an API key's record (never the key) under its hex SHA-256. */
  keys: string;
  /** Default `vigil_key_uses`: when each key was last used (ISO time), under its id. */
  keyUses: string;
}

export const REGISTRY_BUCKETS: RegistryBuckets = { orgs: 'vigil_orgs', keys: 'vigil_keys', keyUses: 'vigil_key_uses' };

/**
 * KV adapter of RegistryStore (cluster mode, DESIGN §8): orgs, keys and key uses in replicated buckets,
 * each mirrored in memory (KvMirror), so reads stay synchronous. A write resolves once replicated
 * to a quorum and is read back at once on this node; other nodes (and a server beside the CLI)
 * see it when their watch delivers it, typically within milliseconds. Keys are `kvToken`s of the
 * slug and of the hash (both plain in practice). Values are msgpack.
 */
export class KvRegistryStore implements RegistryStore {
  private constructor(
    private readonly orgs: KvMirror<OrgRecord>,
    private readonly keys: KvMirror<KeyRecord>,
    private readonly uses: KvMirror<string>,
  ) {}

  static async open(nc: NatsConnection, options: KvBucketOptions & { buckets?: Partial<RegistryBuckets> }): Promise<KvRegistryStore> {
    const [orgs, keys, uses] = await openAll([
      KvMirror.open<OrgRecord>(nc, { ...options, bucket: options.buckets?.orgs ?? REGISTRY_BUCKETS.orgs }),
      KvMirror.open<KeyRecord>(nc, { ...options, bucket: options.buckets?.keys ?? REGISTRY_BUCKETS.keys }),
      KvMirror.open<string>(nc, { ...options, bucket: options.buckets?.keyUses ?? REGISTRY_BUCKETS.keyUses }),
    ]);
    return new KvRegistryStore(orgs, keys, uses);
  }

  getOrg(slug: string): OrgRecord | undefined {
    return this.orgs.get(kvToken(slug));
  }

  async putOrg(org: OrgRecord): Promise<void> {
    await this.orgs.put(kvToken(org.slug), org);
  }

  /** By slug, as the LMDB table lists them. */
  listOrgs(): OrgRecord[] {
    return [...this.orgs.entries()].map(([, org]) => org).sort((a, b) => (a.slug < b.slug ? -1 : a.slug > b.slug ? 1 : 0));
  }

  getKey(hash: string): KeyRecord | undefined {
    return this.keys.get(kvToken(hash));
  }

  async putKey(key: KeyRecord): Promise<void> {
    await this.keys.put(kvToken(key.hash), key);
  }

  listKeys(): KeyRecord[] {
    return [...this.keys.entries()].map(([, key]) => key);
  }

  keyUsedAt(id: string): string | undefined {
    return this.uses.get(kvToken(id));
  }

  /** Last writer wins between nodes: a use a moment older may replace a newer (the times are for people, not for checks). */
  async putKeyUses(uses: readonly { id: string; at: string }[]): Promise<void> {
    await Promise.all(uses.filter(({ id, at }) => (this.keyUsedAt(id) ?? '') < at).map(({ id, at }) => this.uses.put(kvToken(id), at)));
  }

  isEmpty(): boolean {
    return this.orgs.size === 0 && this.keys.size === 0;
  }

  async close(): Promise<void> {
    await Promise.all([this.orgs.close(), this.keys.close(), this.uses.close()]);
  }
}
