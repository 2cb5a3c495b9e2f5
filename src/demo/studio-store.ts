import type { Database, Key } from 'lmdb';
import type { StudioAgent } from './studio-agent.js';

/**
 * Where studio agents are kept, per org. Reads see every write of this store that has resolved
 * (another node's once it has reached this one). `put` inserts or replaces one agent and resolves
 * once it is durable. The store does not allocate ids or check uniqueness: its one caller (the
 * Studio) serializes writes per org and does both.
 */
export interface StudioAgentStore {
  get(org: string, agentId: string): StudioAgent | undefined;
  /** The org's agents by id. */
  list(org: string): StudioAgent[];
  put(org: string, agent: StudioAgent): Promise<void>;
}

/** What the LMDB adapter needs of the environment (LmdbEnv): a named table, its writes (the free-space floor) and its durability barrier. */
export interface TableHost {
  table<K extends Key, V>(name: string): Database<V, K>;
  flushed(): Promise<void>;
  write<T>(start: () => PromiseLike<T>): Promise<T>;
}

/**
 * Studio agents in the `studio_agents` table of the service's LMDB environment, keyed
 * `[org, agent_id]` (values msgpack). This is a local store, not the ledger: what the ledger
 * must know of a studio agent (its registration, retirement and chat events) goes through the command router.
 */
export class LmdbStudioAgentStore implements StudioAgentStore {
  private readonly db: Database<StudioAgent, [string, string]>;

  constructor(private readonly host: TableHost) {
    this.db = host.table<[string, string], StudioAgent>('studio_agents');
  }

  get(org: string, agentId: string): StudioAgent | undefined {
    return this.db.get([org, agentId]);
  }

  list(org: string): StudioAgent[] {
    // agent_ids are ASCII (schemas.agentId), so '\uffff' sorts after every one of them.
    const agents = [...this.db.getRange({ start: [org, ''], end: [org, '\uffff'] }).map(({ value }) => value)];
    return agents.sort((a, b) => a.id - b.id);
  }

  async put(org: string, agent: StudioAgent): Promise<void> {
    await this.host.write(() => this.db.put([org, agent.agent_id], agent));
    await this.host.flushed();
  }
}

/** In memory, for tests of the Studio without LMDB. */
export class MemoryStudioAgentStore implements StudioAgentStore {
  private readonly orgs = new Map<string, Map<string, StudioAgent>>();

  get(org: string, agentId: string): StudioAgent | undefined {
    return this.orgs.get(org)?.get(agentId);
  }

  list(org: string): StudioAgent[] {
    return [...(this.orgs.get(org)?.values() ?? [])].sort((a, b) => a.id - b.id);
  }

  put(org: string, agent: StudioAgent): Promise<void> {
    let agents = this.orgs.get(org);
    if (agents === undefined) this.orgs.set(org, (agents = new Map<string, StudioAgent>()));
    agents.set(agent.agent_id, { ...agent });
    return Promise.resolve();
  }
}
