import type { Fence } from '../bus/ledger-log.js';
import { GENESIS_HASH, type LedgerRow } from '../domain/ledger.js';
import { emptyOrgState, evolve, type AgentEntry, type HeldAction, type OrgState, type Refusal } from '../domain/org-state.js';
import type { Policy } from '../domain/policy.js';
import { parseRecord } from '../domain/records.js';
import { VigilError } from '../errors.js';

/** An org writer's state as plain data, for a checkpoint. */
export interface WriterSnapshot {
  lastSeq: number;
  /** The ledger log's fence after `lastSeq` (what the writer's next append presents). */
  fence: Fence;
  head: Buffer;
  lastMs: number;
  nextEventId: number;
  agents: [string, AgentEntry][];
  held: [number, HeldAction][];
  closed: number[];
  month: string;
  monthEvents: number;
  monthExports: number;
}

/** Folds an org's committed rows, in order, into the state its writer needs. */
export class OrgRecovery {
  state: OrgState = emptyOrgState();
  lastSeq = 0;
  /** The log's fence after the rows applied; set by whoever reads them from the log. */
  fence: Fence = 0;
  private start: Buffer = GENESIS_HASH;
  private lastRow: LedgerRow | null = null;
  private lastAt: string | null = null;
  private lastAtMs = 0;

  constructor(private readonly policy: Policy) {}

  /** Chain hash of the last row applied (taken once, when asked, not for every row). */
  get head(): Buffer {
    return this.lastRow === null ? this.start : Buffer.from(this.lastRow.chainHash);
  }

  /** Time of the last row applied (parsed once, when asked, not for every row). */
  get lastMs(): number {
    if (this.lastAt !== null) {
      this.lastAtMs = Date.parse(this.lastAt);
      this.lastAt = null;
    }
    return this.lastAtMs;
  }

  /** Starts from a checkpoint instead of from nothing. */
  static from(policy: Policy, snapshot: WriterSnapshot): OrgRecovery {
    const recovery = new OrgRecovery(policy);
    recovery.state = {
      agents: new Map(snapshot.agents),
      nextEventId: snapshot.nextEventId,
      held: new Map(snapshot.held),
      closed: new Set(snapshot.closed),
      month: snapshot.month,
      monthEvents: snapshot.monthEvents,
      monthExports: snapshot.monthExports,
    };
    recovery.lastSeq = snapshot.lastSeq;
    recovery.fence = snapshot.fence;
    recovery.start = Buffer.from(snapshot.head);
    recovery.lastAtMs = snapshot.lastMs;
    return recovery;
  }

  /** The state as plain data (a checkpoint's shape; also what a replay worker sends back). */
  snapshot(): WriterSnapshot {
    return writerSnapshot(this.state, this.lastSeq, this.head, this.lastMs, this.fence);
  }

  apply(row: LedgerRow): void {
    const record = parseRecord(row);
    if (record === null) throw new LedgerDamagedError(row.seq);
    evolve(this.state, record, this.policy);
    this.lastSeq = row.seq;
    this.lastRow = row;
    this.lastAt = row.recordedAt;
  }
}

/**
 * An org writer's state as plain data. Agent entries are new objects, so planning may go on and
 * replace an entry's view and scoring (those objects themselves are never changed in place).
 */
export function writerSnapshot(state: OrgState, lastSeq: number, head: Buffer, lastMs: number, fence: Fence): WriterSnapshot {
  return {
    lastSeq,
    fence,
    head,
    lastMs,
    nextEventId: state.nextEventId,
    agents: [...state.agents].map(([id, e]) => [id, { view: e.view, scoring: e.scoring }]),
    held: [...state.held],
    closed: [...state.closed],
    month: state.month,
    monthEvents: state.monthEvents,
    monthExports: state.monthExports,
  };
}

/**
 * Joins writer states rebuilt from disjoint sets of agents (a partitioned replay; every record
 * but an export belongs to one agent, and exports all go to one part). The month counters are
 * those of the latest month any part saw: record times never go back, so that is the month of
 * the org's last event or export. `tail` is the org's last row, with the log's fence after it.
 */
export function mergeWriterSnapshots(parts: readonly WriterSnapshot[], tail: { seq: number; head: Buffer; ms: number; fence: Fence }): WriterSnapshot {
  const month = parts.reduce((m, p) => (p.month > m ? p.month : m), '');
  const current = parts.filter((p) => p.month === month);
  return {
    lastSeq: tail.seq,
    fence: tail.fence,
    head: tail.head,
    lastMs: tail.ms,
    nextEventId: Math.max(1, ...parts.map((p) => p.nextEventId)),
    agents: parts.flatMap((p) => p.agents),
    held: parts.flatMap((p) => p.held).sort(([a], [b]) => a - b),
    closed: parts.flatMap((p) => p.closed).sort((a, b) => a - b),
    month,
    monthEvents: current.reduce((n, p) => n + p.monthEvents, 0),
    monthExports: current.reduce((n, p) => n + p.monthExports, 0),
  };
}

/** A row of the ledger being replayed cannot be read (its seq is the first such). */
export class LedgerDamagedError extends Error {
  override name = 'LedgerDamagedError';
  constructor(readonly seq: number) {
    super(`ledger row ${seq} cannot be read`);
  }
}

/** The log message, once per org, of a ledger found to have an unreadable row. */
export const DAMAGED = 'ledger damaged: a row cannot be read; writes to this org are refused, reads serve what precedes it';

/** The answer to every write to an org whose ledger has an unreadable row. */
export function damagedRefusal(org: string, seq: number): Refusal {
  return {
    ok: false,
    code: 'ledger_damaged',
    message: `the ledger of org ${org} cannot be read at seq ${seq}: writes to this org are refused until an operator repairs it (reads still work; GET /audit/{agent_id}/verify names the row)`,
  };
}

/**
 * The answer to a read of an org's ledger that meets an unreadable row (`parseRecord`'s test, the
 * one the writer's replay applies): reads serve what precedes the row, never it or what follows.
 * `details` names the row as the dotted path `ledger.<seq>`.
 */
export function damagedRead(org: string, seq: number): VigilError {
  return new VigilError(
    'ledger_damaged',
    `the ledger of org ${org} cannot be read at seq ${seq}: reads stop before that row, and writes to this org are refused until an operator repairs it (GET /audit/{agent_id}/verify names the row)`,
    [{ path: `ledger.${seq}`, message: 'this row cannot be read' }],
  );
}
