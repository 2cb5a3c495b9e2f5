import { createHash } from 'node:crypto';
import { isListed, toPublicRecord, type PublicRecord, type PublicSource } from '../domain/public-record.js';
import type { AgentDirectory } from './agent-directory.js';

export interface Rendered {
  json: string;
  etag: string;
}

/** What public reads are made of for one org: its agents (listed or not) and its ledger head. */
export interface PublicOrg {
  agents: ReadonlyMap<string, PublicSource>;
  head: string | null;
  /** Changes whenever the agents or the head may have: rendered answers are kept until it does. */
  version: number;
}

/**
 * Where public reads come from: the node's own projection (embedded mode), or the bucket the
 * orgs' owners publish to (cluster mode, KvPublicRecords). Reads are synchronous, from memory.
 */
export interface PublicSources {
  org(org: string): PublicOrg | undefined;
}

/** The embedded source: the agent directory, versioned by the org's ledger length. */
export function directorySources(directory: AgentDirectory): PublicSources {
  return {
    org(org) {
      const summary = directory.org(org);
      return summary === undefined ? undefined : { agents: summary.agents, head: summary.head, version: summary.length };
    },
  };
}

interface OrgCache {
  version: number;
  listed: PublicSource[] | null;
  records: Map<string, Rendered>;
  lists: Map<string, Rendered>;
}

const MAX_LISTS_PER_ORG = 64;

/**
 * Public agent records, served from memory. Every change to an agent, and every new ledger head,
 * changes its org's version (embedded: a committed row, so the ledger length), so a rendered
 * answer (with its ETag) is reused until the org's next version. The ETag is a digest of
 * the answer's bytes alone, taken once per rendering: a validator carrying the ledger length
 * would tell anyone how many records the org's private agents write.
 */
export class PublicRecords {
  private readonly cache = new Map<string, OrgCache>();

  constructor(
    private readonly sources: PublicSources,
    private readonly appUrl: string,
    private readonly policyDigest: string,
  ) {}

  /** The public record of a listed agent, or undefined (not public, retired, unknown). */
  record(org: string, agentId: string): PublicRecord | undefined {
    const summary = this.sources.org(org);
    const agent = summary?.agents.get(agentId);
    if (summary === undefined || agent === undefined || !isListed(agent)) return undefined;
    return toPublicRecord(org, agent, summary.head, this.appUrl, this.policyDigest);
  }

  recordJson(org: string, agentId: string): Rendered | undefined {
    const cache = this.orgCache(org);
    if (cache === undefined) return undefined;
    let rendered = cache.records.get(agentId);
    if (rendered === undefined) {
      const record = this.record(org, agentId);
      if (record === undefined) return undefined;
      rendered = renderedOf(JSON.stringify(record));
      cache.records.set(agentId, rendered);
    }
    return rendered;
  }

  /** A page of the org's listed agents by agent_id, or undefined when it has none. */
  listJson(org: string, limit: number, offset: number): Rendered | undefined {
    const cache = this.orgCache(org);
    if (cache === undefined) return undefined;
    const key = `${limit}:${offset}`;
    let rendered = cache.lists.get(key);
    if (rendered === undefined) {
      const summary = this.sources.org(org)!;
      cache.listed ??= [...summary.agents.values()].filter(isListed).sort((a, b) => (a.agent_id < b.agent_id ? -1 : 1));
      if (cache.listed.length === 0) return undefined;
      const agents = cache.listed
        .slice(offset, offset + limit)
        .map((a) => toPublicRecord(org, a, summary.head, this.appUrl, this.policyDigest));
      rendered = renderedOf(JSON.stringify({ org, total: cache.listed.length, limit, offset, agents }));
      if (cache.lists.size >= MAX_LISTS_PER_ORG) cache.lists.clear();
      cache.lists.set(key, rendered);
    }
    return rendered;
  }

  private orgCache(org: string): OrgCache | undefined {
    const summary = this.sources.org(org);
    if (summary === undefined) return undefined;
    let cache = this.cache.get(org);
    if (cache === undefined || cache.version !== summary.version) {
      cache = { version: summary.version, listed: null, records: new Map(), lists: new Map() };
      this.cache.set(org, cache);
    }
    return cache;
  }
}

/** An answer and its strong ETag: 132 bits of the SHA-256 of its UTF-8 bytes, nothing else. */
export function renderedOf(json: string): Rendered {
  return { json, etag: `"${createHash('sha256').update(json).digest('base64url').slice(0, 22)}"` };
}
