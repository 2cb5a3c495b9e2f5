import { createHash } from 'node:crypto';
import { isListed, toPublicRecord, type PublicRecord } from '../domain/public-record.js';
import type { AgentDirectory, AgentSummary } from './agent-directory.js';

export interface Rendered {
  json: string;
  etag: string;
}

interface OrgCache {
  length: number;
  listed: AgentSummary[] | null;
  records: Map<string, Rendered>;
  lists: Map<string, Rendered>;
}

const MAX_LISTS_PER_ORG = 64;

/**
 * Public agent records, served from memory. Every change to an agent, and every new ledger head,
 * is a committed row of its org, so an org's ledger length versions all of its public answers: a
 * rendered answer (with its ETag) is reused until the org's next commit. The ETag is a digest of
 * the answer's bytes alone, taken once per rendering: a validator carrying the ledger length
 * would tell anyone how many records the org's private agents write.
 */
export class PublicRecords {
  private readonly cache = new Map<string, OrgCache>();

  constructor(
    private readonly directory: AgentDirectory,
    private readonly appUrl: string,
    private readonly policyDigest: string,
  ) {}

  /** The public record of a listed agent, or undefined (not public, retired, unknown). */
  record(org: string, agentId: string): PublicRecord | undefined {
    const summary = this.directory.org(org);
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
      const summary = this.directory.org(org)!;
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
    const summary = this.directory.org(org);
    if (summary === undefined) return undefined;
    let cache = this.cache.get(org);
    if (cache === undefined || cache.length !== summary.length) {
      cache = { length: summary.length, listed: null, records: new Map(), lists: new Map() };
      this.cache.set(org, cache);
    }
    return cache;
  }
}

/** An answer and its strong ETag: 132 bits of the SHA-256 of its UTF-8 bytes, nothing else. */
export function renderedOf(json: string): Rendered {
  return { json, etag: `"${createHash('sha256').update(json).digest('base64url').slice(0, 22)}"` };
}
