import type { Database } from 'lmdb';
import type { LmdbEnv } from './lmdb-env.js';
import type { Snapshot, SnapshotStore } from './snapshot-store.js';

/** LMDB adapter of SnapshotStore: the `snapshots` table, keyed `<consumer>\0<org>`. */
export class LmdbSnapshotStore implements SnapshotStore {
  private snapshots!: Database<Snapshot, string>;

  constructor(private readonly env: LmdbEnv) {
    env.attach((root) => (this.snapshots = root.openDB<Snapshot, string>({ name: 'snapshots' })));
  }

  getSnapshot(name: string, org: string): Snapshot | undefined {
    return this.snapshots.get(`${name}\u0000${org}`);
  }

  async putSnapshot(name: string, org: string, snapshot: Snapshot): Promise<void> {
    await this.env.write(() => this.snapshots.put(`${name}\u0000${org}`, snapshot));
    await this.env.flushed();
  }

  snapshotOrgs(name: string): string[] {
    const prefix = `${name}\u0000`;
    return [...this.snapshots.getKeys({ start: prefix, end: `${name}\u0001` })].map((k) => k.slice(prefix.length));
  }
}
