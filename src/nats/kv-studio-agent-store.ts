import type { NatsConnection } from '@nats-io/transport-node';
import type { StudioAgent } from '../demo/studio-agent.js';
import type { StudioAgentStore } from '../demo/studio-store.js';
import { KvMirror, type KvBucketOptions } from './kv-mirror.js';
import { fromKvToken, kvToken } from './kv-key.js';

/** Default bucket: each studio agent under `<kvToken(org)>.<kvToken(agent_id)>`. */
export const STUDIO_AGENTS_BUCKET = 'vigil_studio_agents';

const keyOf = (org: string, agentId: string): string => `${kvToken(org)}.${kvToken(agentId)}`;

/**
 * KV adapter of StudioAgentStore (cluster mode): one bucket mirrored in memory, with an index by
 * org for `list`. `put` resolves once replicated and is read back at once on this node. As with
 * the LMDB adapter, ids and uniqueness are the Studio's, which serializes writes per org; across
 * nodes it relies on the org having one writer.
 */
export class KvStudioAgentStore implements StudioAgentStore {
  private constructor(
    private readonly mirror: KvMirror<StudioAgent>,
    private readonly byOrg: Map<string, Map<string, StudioAgent>>,
  ) {}

  static async open(nc: NatsConnection, options: KvBucketOptions & { bucket?: string }): Promise<KvStudioAgentStore> {
    const byOrg = new Map<string, Map<string, StudioAgent>>();
    const mirror = await KvMirror.open<StudioAgent>(nc, {
      ...options,
      bucket: options.bucket ?? STUDIO_AGENTS_BUCKET,
      onChange: (key, value) => {
        const [orgToken = '', agentToken = ''] = key.split('.');
        const org = fromKvToken(orgToken);
        let agents = byOrg.get(org);
        if (value === undefined) {
          agents?.delete(fromKvToken(agentToken));
          if (agents?.size === 0) byOrg.delete(org);
          return;
        }
        if (agents === undefined) byOrg.set(org, (agents = new Map<string, StudioAgent>()));
        agents.set(fromKvToken(agentToken), value);
      },
    });
    return new KvStudioAgentStore(mirror, byOrg);
  }

  get(org: string, agentId: string): StudioAgent | undefined {
    return this.mirror.get(keyOf(org, agentId));
  }

  list(org: string): StudioAgent[] {
    return [...(this.byOrg.get(org)?.values() ?? [])].sort((a, b) => a.id - b.id);
  }

  async put(org: string, agent: StudioAgent): Promise<void> {
    await this.mirror.put(keyOf(org, agent.agent_id), agent);
  }

  close(): Promise<void> {
    return this.mirror.close();
  }
}
