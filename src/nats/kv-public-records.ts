import type { PublicOrg, PublicSources } from '../actors/public-records.js';
import type { PublicSource } from '../domain/public-record.js';
import { KvMirror, type KvBucketOptions } from './kv-mirror.js';
import { fromKvToken, kvToken } from './kv-key.js';

/** Default bucket of the public records the orgs' owners publish. */
export const PUBLIC_BUCKET = 'vigil_public';

/** Under `<org>`: the org's ledger head and length as of the owner's flush that wrote it. */
export interface PublishedOrg {
  head: string | null;
  length: number;
}

type Published = PublishedOrg | PublicSource;

interface OrgEntry extends PublicOrg {
  agents: Map<string, PublicSource>;
  /** Agent changes read since the org's last value (null: removed), shown with its next. */
  staged: Map<string, PublicSource | null>;
}

/**
 * The public records of every org, as their owners publish them (see PublicPublisher), mirrored in
 * memory on every node: the cluster's source of public reads, which never forward.
 *
 * Layout: one key per listed agent, `<org>.<agent>`, holding what toPublicRecord needs of it
 * (about 0.5 KB, under 4 KB at the schema's limits), and one per org, `<org>`, holding its head
 * and length. One value per org would not do: an org of the scale plan may list 10,000 agents,
 * some 5-40 MB, far past NATS's 1 MB payload; a key per agent stays small at any plan, and a
 * change to one agent rewrites only it.
 *
 * Every record names the org's head, which the org key holds, so a flush writes the changed
 * agents first and the org key after them; the watch hands them over in that order, and a reader
 * shows an agent's change only with the org value that follows it. A flush thus appears whole on
 * every node: a record of an agent's new state never pairs with an older head.
 */
export class KvPublicRecords implements PublicSources {
  private readonly orgs = new Map<string, OrgEntry>();
  private version = 0;
  private mirror!: KvMirror<Published>;

  private constructor() {}

  static async open(nc: Parameters<typeof KvMirror.open>[0], options: KvBucketOptions & { bucket?: string }): Promise<KvPublicRecords> {
    const records = new KvPublicRecords();
    records.mirror = await KvMirror.open<Published>(nc, {
      ...options,
      bucket: options.bucket ?? PUBLIC_BUCKET,
      onChange: (key, value) => records.changed(key, value),
    });
    return records;
  }

  org(org: string): PublicOrg | undefined {
    return this.orgs.get(org);
  }

  /** Orgs with anything published. */
  orgNames(): string[] {
    return [...this.orgs.keys()];
  }

  /** The org value last written (shown or not). */
  latestOrg(org: string): PublishedOrg | undefined {
    return this.mirror.get(kvToken(org)) as PublishedOrg | undefined;
  }

  /** The agent value last written (shown or not), undefined once removed. */
  latestAgent(org: string, agentId: string): PublicSource | undefined {
    return this.mirror.get(agentKey(org, agentId)) as PublicSource | undefined;
  }

  /** Every agent of the org with a value shown or staged (some may be staged for removal). */
  publishedAgents(org: string): string[] {
    const entry = this.orgs.get(org);
    return entry === undefined ? [] : [...new Set([...entry.agents.keys(), ...entry.staged.keys()])];
  }

  putAgent(org: string, agentId: string, source: PublicSource): Promise<number> {
    return this.mirror.put(agentKey(org, agentId), source);
  }

  removeAgent(org: string, agentId: string): Promise<number> {
    return this.mirror.delete(agentKey(org, agentId));
  }

  putOrg(org: string, value: PublishedOrg): Promise<number> {
    return this.mirror.put(kvToken(org), value);
  }

  close(): Promise<void> {
    return this.mirror.close();
  }

  private changed(key: string, value: Published | undefined): void {
    const dot = key.indexOf('.');
    const org = fromKvToken(dot === -1 ? key : key.slice(0, dot));
    let entry = this.orgs.get(org);
    if (dot !== -1) {
      if (entry === undefined) {
        entry = { agents: new Map(), staged: new Map(), head: null, version: ++this.version };
        this.orgs.set(org, entry);
      }
      entry.staged.set(fromKvToken(key.slice(dot + 1)), (value as PublicSource | undefined) ?? null);
      return;
    }
    if (value === undefined) {
      // Not written by Vigil (it never removes an org's value): the org is no longer shown.
      this.orgs.delete(org);
      return;
    }
    if (entry === undefined) {
      entry = { agents: new Map(), staged: new Map(), head: null, version: 0 };
      this.orgs.set(org, entry);
    }
    for (const [agentId, source] of entry.staged) {
      if (source === null) entry.agents.delete(agentId);
      else entry.agents.set(agentId, source);
    }
    entry.staged.clear();
    entry.head = (value as PublishedOrg).head;
    entry.version = ++this.version;
  }
}

function agentKey(org: string, agentId: string): string {
  return `${kvToken(org)}.${kvToken(agentId)}`;
}
