import type { OrgSummary } from '../actors/agent-directory.js';
import { isListed, type PublicSource } from '../domain/public-record.js';
import { ensureError } from '../errors.js';
import type { Logger } from '../log.js';
import type { KvPublicRecords } from './kv-public-records.js';

/** How often an owner publishes the public records of its orgs that changed (README: cluster mode). */
export const PUBLIC_FLUSH_MS = 250;
/** Orgs published at once, and puts in flight for one org: a large org does not flood the server. */
const ORGS_AT_ONCE = 8;
const PUTS_AT_ONCE = 128;

export interface PublicPublisherOptions {
  /** Whether this node owns the org now (only the owner publishes it). */
  owns(org: string): boolean;
  log: Logger;
  intervalMs?: number;
}

/**
 * Publishes, for each org this node owns, its listed agents' public records and its head to the
 * public bucket (KvPublicRecords), coalesced: a commit marks its org dirty, and a flush (at once
 * when none ran in the last interval, else at its end) compares each dirty org with what the
 * bucket holds and writes only the difference (the changed agents, then the org value), so an
 * org's keys are written at most once an interval however fast it writes. Delisted, retired and
 * unknown agents are removed.
 *
 * Off the request path: a put that fails (the bucket unavailable) leaves its org dirty, the
 * failure is logged once, and the next interval's flush tries again; ingest never waits on it. Since
 * each flush diffs against the bucket, a flush cut short or a new owner after an old one (which
 * `markAll` asks for) ends with the bucket holding this node's view. One flush runs at a time.
 */
export class PublicPublisher {
  private readonly dirty = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private lastFlush = 0;
  private running = false;
  private failing = false;

  constructor(
    private readonly records: KvPublicRecords,
    private readonly directory: (org: string) => OrgSummary | undefined,
    private readonly options: PublicPublisherOptions,
  ) {}

  start(): void {
    this.running = true;
    this.schedule();
  }

  /** The org committed rows (its directory changed). */
  changed(org: string): void {
    this.dirty.add(org);
    this.schedule();
  }

  /** Publishes these orgs' views next time (ownership gained: what the previous owner left may trail). */
  markAll(orgs: Iterable<string>): void {
    for (const org of orgs) this.dirty.add(org);
    this.schedule();
  }

  /** Writes what is dirty now; resolves when done (a flush already running is waited for first). */
  flush(): Promise<void> {
    this.flushing ??= this.flushDirty().finally(() => (this.flushing = null));
    return this.flushing;
  }

  /** Stops scheduling after a last flush. */
  async close(): Promise<void> {
    this.running = false;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.flushing;
    await this.flush();
  }

  /**
   * A flush at once if none ran in the last interval (a lone write shows within milliseconds),
   * else when the interval is up: at most one flush an interval, and none while nothing is dirty.
   */
  private schedule(): void {
    if (!this.running || this.timer !== null || this.dirty.size === 0) return;
    const interval = this.options.intervalMs ?? PUBLIC_FLUSH_MS;
    this.timer = setTimeout(() => {
      this.lastFlush = Date.now();
      void this.flush().then(() => {
        this.timer = null;
        this.schedule();
      });
    }, Math.max(0, this.lastFlush + interval - Date.now()));
    this.timer.unref();
  }

  private async flushDirty(): Promise<void> {
    const orgs = [...this.dirty].filter((org) => this.options.owns(org));
    this.dirty.clear();
    const failures: { org: string; err: Error }[] = [];
    const next = (): string | undefined => (failures.length === 0 ? orgs.shift() : undefined);
    const worker = async (): Promise<void> => {
      for (let org = next(); org !== undefined; org = next()) {
        try {
          await this.publish(org);
        } catch (error) {
          this.dirty.add(org);
          failures.push({ org, err: ensureError(error) });
        }
      }
    };
    await Promise.all(Array.from({ length: ORGS_AT_ONCE }, worker));
    // After a failure the rest wait for the next interval rather than each time out in turn.
    for (const org of orgs) this.dirty.add(org);
    const failed = failures[0];
    if (failed !== undefined && !this.failing) this.options.log.warn({ org: failed.org, dirty: this.dirty.size, err: failed.err }, 'publishing public records failed; retried every interval');
    if (failed === undefined && this.failing) this.options.log.info({}, 'publishing public records works again');
    this.failing = failed !== undefined;
  }

  private async publish(org: string): Promise<void> {
    // Read at once, before any await: the values written are one state of the org.
    const summary = this.directory(org);
    const listed = new Map<string, PublicSource>();
    for (const agent of summary?.agents.values() ?? []) if (isListed(agent)) listed.set(agent.agent_id, sourceOf(agent));
    const writes: (() => Promise<unknown>)[] = [];
    for (const [agentId, source] of listed) {
      if (!sameSource(this.records.latestAgent(org, agentId), source)) writes.push(() => this.records.putAgent(org, agentId, source));
    }
    for (const agentId of this.records.publishedAgents(org)) {
      if (!listed.has(agentId) && this.records.latestAgent(org, agentId) !== undefined) writes.push(() => this.records.removeAgent(org, agentId));
    }
    const value = { head: summary?.head ?? null, length: summary?.length ?? 0 };
    const current = this.records.latestOrg(org);
    const orgCurrent = current === undefined ? listed.size === 0 : current.head === value.head && current.length === value.length;
    if (writes.length === 0 && orgCurrent) return;
    for (let i = 0; i < writes.length; i += PUTS_AT_ONCE) await Promise.all(writes.slice(i, i + PUTS_AT_ONCE).map((write) => write()));
    // Last, and even if unchanged: readers show the agents' changes with the org value after them.
    await this.records.putOrg(org, value);
  }
}

/** A copy of exactly the fields a public record is made of (the summary is updated in place). */
function sourceOf(agent: PublicSource): PublicSource {
  return {
    agent_id: agent.agent_id,
    name: agent.name,
    kind: agent.kind,
    observed: agent.observed,
    is_active: agent.is_active,
    public: agent.public,
    public_links: agent.public_links.map((l) => ({ kind: l.kind, url: l.url })),
    gate: agent.gate,
    bii: agent.bii,
    policy_digest: agent.policy_digest,
    ledger_records: agent.ledger_records,
    last_event_at: agent.last_event_at,
  };
}

function sameSource(a: PublicSource | undefined, b: PublicSource): boolean {
  return (
    a !== undefined &&
    a.name === b.name &&
    a.kind === b.kind &&
    a.observed === b.observed &&
    a.is_active === b.is_active &&
    a.public === b.public &&
    a.gate === b.gate &&
    a.bii === b.bii &&
    a.policy_digest === b.policy_digest &&
    a.ledger_records === b.ledger_records &&
    a.last_event_at === b.last_event_at &&
    a.public_links.length === b.public_links.length &&
    a.public_links.every((l, i) => l.kind === b.public_links[i]!.kind && l.url === b.public_links[i]!.url)
  );
}
