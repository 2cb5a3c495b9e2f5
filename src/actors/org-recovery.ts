import { GENESIS_HASH, rowBody, type LedgerRow } from '../domain/ledger.js';
import { applyAgentRecord, applyEventRecord, applyReviewRecord, countExport, emptyOrgState, type AgentEntry, type HeldAction, type OrgState } from '../domain/org-state.js';
import type { Policy } from '../domain/policy.js';

/** An org writer's state as plain data, for a checkpoint. */
export interface WriterSnapshot {
  lastSeq: number;
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
    recovery.start = Buffer.from(snapshot.head);
    recovery.lastAtMs = snapshot.lastMs;
    return recovery;
  }

  apply(row: LedgerRow): void {
    if (row.agentId !== null) {
      if (row.kind === 'agent') applyAgentRecord(this.state, rowBody(row), row.recordedAt);
      else if (row.kind === 'event') applyEventRecord(this.state, row.agentId, rowBody(row), this.policy, row.recordedAt);
      else if (row.kind === 'review') applyReviewRecord(this.state, row.agentId, rowBody(row));
    } else if (row.kind === 'export') {
      countExport(this.state, row.recordedAt);
    }
    this.lastSeq = row.seq;
    this.lastRow = row;
    this.lastAt = row.recordedAt;
  }
}
