import type { Bus } from '../bus/bus.js';
import type { OrgCommand, OrgReply } from '../bus/messages.js';
import { GENESIS_HASH, makeRow, type LedgerRow } from '../domain/ledger.js';
import {
  applyAgentRecord,
  applyEventRecord,
  emptyOrgState,
  planIngest,
  planRegister,
  planUpdate,
  type OrgState,
  type Planned,
} from '../domain/org-state.js';
import type { Policy } from '../domain/policy.js';
import { ensureError } from '../errors.js';

interface Pending {
  command: OrgCommand;
  resolve: (reply: OrgReply) => void;
}

export interface OrgActorOptions {
  policy: Policy;
  policyDigest: string;
  /** Milliseconds since the epoch; injected so tests and replays control time. */
  now: () => number;
  /** Commands waiting beyond this are refused with `overloaded` (HTTP 429). */
  maxPending: number;
}

/**
 * The single writer of one org's ledger. Holds the chain head, next seq and every agent's scoring
 * state in memory. Only one batch is processed at a time: commands are decided strictly in
 * arrival order, the batch's rows are appended with one durable write (group commit), and only
 * then are the callers answered. If an append fails, the batch is refused and the state is
 * rebuilt from the ledger, so memory never runs ahead of what is durable.
 */
export class OrgLedgerActor {
  private state: OrgState = emptyOrgState();
  private lastSeq = 0;
  private head: Buffer = GENESIS_HASH;
  private lastRecordedMs = 0;
  private queue: Pending[] = [];
  private running = false;

  private constructor(
    readonly org: string,
    private readonly bus: Bus,
    private readonly options: OrgActorOptions,
  ) {}

  static async start(org: string, bus: Bus, options: OrgActorOptions): Promise<OrgLedgerActor> {
    const actor = new OrgLedgerActor(org, bus, options);
    await actor.recover();
    return actor;
  }

  get length(): number {
    return this.lastSeq;
  }

  submit(command: OrgCommand): Promise<OrgReply> {
    if (this.queue.length >= this.options.maxPending) {
      return Promise.resolve({ ok: false, code: 'overloaded', message: `org ${this.org} has too many commands waiting` });
    }
    return new Promise((resolve) => {
      this.queue.push({ command, resolve });
      if (!this.running) void this.run();
    });
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue;
        this.queue = [];
        await this.process(batch);
      }
    } finally {
      this.running = false;
    }
  }

  private async process(batch: Pending[]): Promise<void> {
    const expectedLastSeq = this.lastSeq;
    const startHead = this.head;
    const recordedMs = Math.max(this.options.now(), this.lastRecordedMs);
    const recordedAt = new Date(recordedMs).toISOString();
    const rows: LedgerRow[] = [];
    const replies: OrgReply[] = [];
    for (const { command } of batch) {
      const planned = this.plan(command, recordedAt);
      if ('ok' in planned) {
        replies.push(planned);
        continue;
      }
      const row = makeRow(this.head, this.lastSeq + 1, planned.kind, recordedAt, planned.agentId, planned.body);
      rows.push(row);
      this.lastSeq = row.seq;
      this.head = row.chainHash;
      replies.push({ ok: true, value: planned.result } as OrgReply);
    }

    let failure: string | null = null;
    try {
      if (rows.length > 0) {
        const outcome = await this.bus.append(this.org, rows, expectedLastSeq);
        if (!outcome.ok) failure = 'the ledger was written by another writer';
      }
    } catch (error) {
      failure = ensureError(error).message;
    }
    if (failure === null) {
      this.lastRecordedMs = recordedMs;
      batch.forEach((pending, i) => pending.resolve(replies[i]!));
      return;
    }
    console.error(JSON.stringify({ level: 'error', msg: 'ledger append failed', org: this.org, error: failure }));
    this.lastSeq = expectedLastSeq;
    this.head = startHead;
    for (const pending of batch) pending.resolve({ ok: false, code: 'unavailable', message: 'the ledger could not be written; retry' });
    await this.recover().catch((error: unknown) => {
      console.error(JSON.stringify({ level: 'error', msg: 'recovery failed', org: this.org, error: ensureError(error).message }));
    });
  }

  private plan(command: OrgCommand, recordedAt: string): Planned<unknown> {
    switch (command.type) {
      case 'agent.register':
        return planRegister(this.state, command.agent, recordedAt);
      case 'agent.update':
        return planUpdate(this.state, command.agentId, command.changes, recordedAt);
      case 'event.ingest':
        return planIngest(this.state, command.event, this.options.policy, this.options.policyDigest);
    }
  }

  /** Rebuilds head, seq and agent state from the org's committed ledger. */
  private async recover(): Promise<void> {
    const state = emptyOrgState();
    let lastSeq = 0;
    let head = GENESIS_HASH;
    let lastMs = 0;
    for await (const chunk of this.bus.read(this.org, 1)) {
      for (const row of chunk) {
        const body = JSON.parse(row.bodyJson) as Record<string, unknown>;
        if (row.kind === 'agent' && row.agentId !== null) applyAgentRecord(state, body, row.recordedAt);
        else if (row.kind === 'event' && row.agentId !== null) applyEventRecord(state, row.agentId, body, this.options.policy);
        lastSeq = row.seq;
        head = row.chainHash;
        lastMs = Date.parse(row.recordedAt);
      }
    }
    this.state = state;
    this.lastSeq = lastSeq;
    this.head = head;
    this.lastRecordedMs = lastMs;
  }
}
