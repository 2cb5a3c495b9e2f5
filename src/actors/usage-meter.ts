import type { ProjectionHandler } from './projection.js';
import { kindOf } from '../domain/records.js';

/** One org's usage in one UTC month, from committed records. */
interface MonthUsage {
  events: number;
  /** Agents with at least one event in the month. */
  agents: Set<string>;
  exports: number;
}

export interface MeterSnapshot {
  head: string | null;
  length: number;
  months: [string, { events: number; agents: string[]; exports: number }][];
}

interface OrgMeter {
  months: Map<string, MonthUsage>;
  head: string | null;
  length: number;
}

/**
 * The usage meter: per org and UTC month (of each record's recorded_at), the events recorded,
 * the agents active and the exports made. Fed only by committed rows, checkpointed like the other
 * projections, so it survives restarts and is rebuilt from the ledger when needed.
 */
export class UsageMeter {
  private readonly orgs = new Map<string, OrgMeter>();

  readonly onCommitted: ProjectionHandler = (org, rows) => {
    const meter = this.meterOf(org);
    let month = '';
    let usage: MonthUsage | undefined;
    for (const row of rows) {
      meter.length = row.seq;
      // Counted by kind alone: the bodies are not read.
      const kind = kindOf(row);
      if (kind !== 'event' && kind !== 'export') continue;
      const m = row.recordedAt.slice(0, 7);
      if (m !== month || usage === undefined) {
        month = m;
        usage = meter.months.get(m);
        if (usage === undefined) {
          usage = { events: 0, agents: new Set(), exports: 0 };
          meter.months.set(m, usage);
        }
      }
      if (kind === 'export') usage.exports++;
      else {
        usage.events++;
        if (row.agentId !== null) usage.agents.add(row.agentId);
      }
    }
    const last = rows[rows.length - 1];
    if (last !== undefined) meter.head = last.chainHash.toString('hex');
  };

  usage(org: string, month: string): { events: number; agents_active: number; exports: number } {
    const u = this.orgs.get(org)?.months.get(month);
    return { events: u?.events ?? 0, agents_active: u?.agents.size ?? 0, exports: u?.exports ?? 0 };
  }

  snapshot(org: string): MeterSnapshot | undefined {
    const m = this.orgs.get(org);
    if (m === undefined) return undefined;
    const months: MeterSnapshot['months'] = [...m.months].map(([month, u]) => [month, { events: u.events, agents: [...u.agents], exports: u.exports }]);
    return { head: m.head, length: m.length, months };
  }

  restore(org: string, snapshot: MeterSnapshot): void {
    const months = new Map<string, MonthUsage>(snapshot.months.map(([month, u]) => [month, { events: u.events, agents: new Set(u.agents), exports: u.exports }]));
    this.orgs.set(org, { months, head: snapshot.head, length: snapshot.length });
  }

  orgNames(): string[] {
    return [...this.orgs.keys()];
  }

  private meterOf(org: string): OrgMeter {
    let meter = this.orgs.get(org);
    if (meter === undefined) {
      meter = { months: new Map(), head: null, length: 0 };
      this.orgs.set(org, meter);
    }
    return meter;
  }
}

/** Joins meters rebuilt from disjoint sets of agents (a partitioned replay): counts add up, agent sets join. */
export function mergeMeters(parts: readonly MeterSnapshot[], head: string | null, length: number): MeterSnapshot {
  const months = new Map<string, { events: number; agents: string[]; exports: number }>();
  for (const part of parts) {
    for (const [month, u] of part.months) {
      const sum = months.get(month);
      if (sum === undefined) months.set(month, { events: u.events, agents: [...u.agents], exports: u.exports });
      else {
        sum.events += u.events;
        sum.agents.push(...u.agents);
        sum.exports += u.exports;
      }
    }
  }
  return { head, length, months: [...months].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) };
}
