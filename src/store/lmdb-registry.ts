import type { Database } from 'lmdb';
import type { LmdbEnv } from './lmdb-env.js';
import type { KeyRecord, OrgRecord, RegistryStore } from './registry-store.js';

const MAX_DECODED_KEYS = 10_000;

/** LMDB adapter of RegistryStore: the `orgs` and `keys` tables. */
export class LmdbRegistryStore implements RegistryStore {
  private orgs!: Database<OrgRecord, string>;
  private keys!: Database<KeyRecord, string>;
  private uses!: Database<string, string>;
  /**
   * Decoded key records by hash, each beside the stored bytes it was decoded from. A read compares
   * the bytes now stored with them and decodes again on any difference, so a key revoked by the CLI
   * from another process is refused at once; the saving is the decode, not the read.
   */
  private readonly decoded = new Map<string, { bytes: Buffer; record: KeyRecord }>();

  constructor(private readonly env: LmdbEnv) {
    env.attach((root) => {
      this.orgs = root.openDB<OrgRecord, string>({ name: 'orgs' });
      this.keys = root.openDB<KeyRecord, string>({ name: 'keys' });
      this.decoded.clear();
      this.uses = root.openDB<string, string>({ name: 'key_uses' });
    });
  }

  getOrg(slug: string): OrgRecord | undefined {
    return this.orgs.get(slug);
  }

  async putOrg(org: OrgRecord): Promise<void> {
    await this.env.write(() => this.orgs.put(org.slug, org));
    await this.env.flushed();
  }

  listOrgs(): OrgRecord[] {
    return [...this.orgs.getRange({}).map(({ value }) => value)];
  }

  getKey(hash: string): KeyRecord | undefined {
    // Read in place (lmdb-js's shared buffer, valid until the next read): a key is read on every
    // authenticated request, and a copy of its bytes was a Buffer made per request.
    const stored = this.keys.getBinaryFast(hash);
    if (stored === undefined) {
      this.decoded.delete(hash);
      return undefined;
    }
    // The shared buffer is longer than its value: its `length` says how much is the value's.
    const seen = this.decoded.get(hash);
    if (seen !== undefined && seen.bytes.length === stored.length && seen.bytes.compare(stored, 0, stored.length) === 0) return seen.record;
    const bytes = Buffer.from(stored.subarray(0, stored.length));
    const record = this.keys.get(hash);
    if (record === undefined) return undefined;
    if (this.decoded.size >= MAX_DECODED_KEYS) this.decoded.clear();
    this.decoded.set(hash, { bytes, record });
    return record;
  }

  async putKey(key: KeyRecord): Promise<void> {
    await this.env.write(() => this.keys.put(key.hash, key));
    await this.env.flushed();
  }

  listKeys(): KeyRecord[] {
    return [...this.keys.getRange({}).map(({ value }) => value)];
  }

  keyUsedAt(id: string): string | undefined {
    return this.uses.get(id);
  }

  async putKeyUses(uses: readonly { id: string; at: string }[]): Promise<void> {
    if (uses.length === 0) return;
    await this.env.write(() =>
      this.uses.transaction(() => {
        for (const { id, at } of uses) if ((this.uses.get(id) ?? '') < at) void this.uses.put(id, at);
      }),
    );
    await this.env.flushed();
  }

  isEmpty(): boolean {
    return this.orgs.getKeysCount() === 0 && this.keys.getKeysCount() === 0;
  }
}
