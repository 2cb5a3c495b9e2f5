import type { Bus } from '../bus/bus.js';
import type { OrgCommand, OrgReply } from '../bus/messages.js';
import { canonicalize } from '../domain/jcs.js';
import { chainRows, type RowDraft, type Sha256Chain } from '../domain/ledger-batch.js';
import { GENESIS_HASH } from '../domain/ledger.js';
import { emptyOrgState, NO_LIMITS, planExport, planIngest, planRegister, planUpdate, type OrgState, type Planned, type PlannedRecord, type WriterLimits } from '../domain/org-state.js';
import { planReview } from '../domain/org-reviews.js';
import type { Policy } from '../domain/policy.js';
import { ensureError } from '../errors.js';
import { DAMAGED, damagedRefusal, LedgerDamagedError, OrgRecovery, writerSnapshot, type WriterSnapshot } from './org-recovery.js';
import type { Logger } from '../log.js';

interface Pending {
  command: OrgCommand;
  resolve: (reply: OrgReply) => void;
  /** The caller's connection: gone before this command is decided, it is refused unrecorded. */
  abandoned: { readonly aborted: boolean } | undefined;
}

export interface OrgActorOptions {
  policy: Policy;
  policyDigest: string;
  /** Milliseconds since the epoch; injected so tests and replays control time. */
  now: () => number;
  /** The native batch hasher (store/batch-hash.ts), or null to hash with node:crypto. */
  sha256Chain?: Sha256Chain | null;
  /** Commands waiting beyond this are refused with `overloaded` (HTTP 429). */
  maxPending: number;
  /** Batches committed but not yet durable at once (group commit pipelining). */
  maxInflight?: number;
  /** Where the writer says what went wrong (failed appends, refused commands, damage). */
  log: Logger;
  /** The org's plan limits in force at `nowMs` (read once per batch). */
  limits?: (org: string, nowMs: number) => WriterLimits;
}

const UNAVAILABLE: OrgReply = { ok: false, code: 'unavailable', message: 'the ledger could not be written; nothing was recorded, retry' };
const ABANDONED: OrgReply = { ok: false, code: 'unavailable', message: 'the caller was gone before the command was decided; nothing was recorded' };
const PLANNING_FAILED: OrgReply = { ok: false, code: 'internal', message: 'the command could not be decided; nothing was recorded' };

/**
 * The single writer of one org's ledger. Holds the chain head, next seq and every agent's scoring
 * state in memory.
 *
 * Commands are decided strictly in arrival order. All commands that arrive in one event-loop turn
 * form one batch, appended with one write (group commit). Batches are pipelined: a batch is
 * appended without waiting for the one before it to commit (the store orders them, and its
 * write thread folds those that queue up into one transaction), up to `maxInflight` not yet
 * durable. Each append is conditional on the one before it, so they commit in order or not at
 * all. A caller is answered only once its batch, and every batch
 * before it, is durable. If an append fails, that batch and every later one in flight are refused
 * and the state is rebuilt from the ledger before anything else is decided, so memory never runs
 * ahead of what is durable.
 */
export class OrgLedgerActor {
  private state: OrgState = emptyOrgState();
  private lastSeq = 0;
  private head: Buffer = GENESIS_HASH;
  private lastRecordedMs = 0;
  private queue: Pending[] = [];
  private inflight = 0;
  /** Settles when every launched batch has been answered, in launch order. */
  private tail: Promise<void> = Promise.resolve();
  private broken = false;
  /** A command threw while planned: the state is rebuilt from the ledger before the next batch. */
  private stale = false;
  /** Set when a rebuild met an unreadable ledger row: every write is refused with it. */
  private damaged: OrgReply | null = null;
  /** Batches launched whose append has not yet reported its commit (or failure). */
  private uncommitted = 0;
  /** A pump is scheduled for the end of this event-loop turn. */
  private scheduled = false;
  private snapshotWaiters: ((snapshot: WriterSnapshot) => void)[] = [];
  private readonly maxInflight: number;

  private constructor(
    readonly org: string,
    private readonly bus: Bus,
    private readonly options: OrgActorOptions,
  ) {
    this.maxInflight = options.maxInflight ?? 8;
  }

  static async start(org: string, bus: Bus, options: OrgActorOptions): Promise<OrgLedgerActor> {
    const actor = new OrgLedgerActor(org, bus, options);
    await actor.recover();
    return actor;
  }

  submit(command: OrgCommand, abandoned?: { readonly aborted: boolean }): Promise<OrgReply> {
    if (this.damaged !== null) return Promise.resolve(this.damaged);
    if (this.queue.length >= this.options.maxPending) {
      return Promise.resolve({ ok: false, code: 'overloaded', message: `org ${this.org} has too many commands waiting` });
    }
    return new Promise((resolve) => {
      this.queue.push({ command, resolve, abandoned });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.pumpLater);
      }
    });
  }

  /** Every command that arrives in one event-loop turn joins one batch. */
  private readonly pumpLater = (): void => {
    this.scheduled = false;
    this.pump();
  };

  private pump(): void {
    while (!this.broken && !this.stale && this.inflight < this.maxInflight && this.queue.length > 0) {
      const batch = this.queue;
      this.queue = [];
      try {
        this.launch(batch);
      } catch (error) {
        // Past the per-command guard (limits, batch hashing): a broken invariant. The batch is
        // refused, and the state (perhaps changed by its planning) rebuilt before the next one.
        this.options.log.error({ org: this.org, error: ensureError(error).message }, 'batch refused: launching it failed');
        for (const pending of batch) pending.resolve(PLANNING_FAILED);
        this.stale = true;
        if (this.inflight === 0) this.tail = this.tail.then(() => this.heal()).then(() => this.pump());
        return;
      }
    }
  }

  private launch(batch: Pending[]): void {
    const expectedLastSeq = this.lastSeq;
    const recordedMs = Math.max(this.options.now(), this.lastRecordedMs);
    this.lastRecordedMs = recordedMs;
    const recordedAt = new Date(recordedMs).toISOString();
    const replies: (OrgReply | PlannedRecord<unknown>)[] = [];
    const drafts: RowDraft[] = [];
    const limits = this.options.limits?.(this.org, recordedMs) ?? NO_LIMITS;
    for (let i = 0; i < batch.length; i++) {
      let planned: Planned<unknown>;
      let bodyJson: string | undefined;
      if (batch[i]!.abandoned?.aborted === true) {
        replies.push(ABANDONED);
        continue;
      }
      try {
        planned = this.plan(batch[i]!.command, recordedAt, limits);
        if (!('ok' in planned)) bodyJson = planned.bodyJson ?? canonicalize(planned.body);
      } catch (error) {
        // A command the rules cannot handle is refused alone. It may have changed the state
        // before it threw, so the rest of the batch waits until the state is rebuilt from the
        // ledger (when nothing is in flight), and the writer goes on from there.
        this.options.log.error({ org: this.org, type: batch[i]!.command.type, error: ensureError(error).message }, 'command refused: planning failed');
        replies.push(PLANNING_FAILED);
        this.stale = true;
        this.queue = batch.splice(i + 1).concat(this.queue);
        break;
      }
      replies.push(planned);
      if ('ok' in planned) continue;
      drafts.push({ kind: planned.kind, recordedAt, agentId: planned.agentId, bodyJson: bodyJson!, body: planned.body });
    }
    // Planning never reads the chain, so the whole batch is hashed at once.
    const rows = chainRows(this.head, this.lastSeq + 1, drafts, this.options.sha256Chain ?? null);
    let r = 0;
    for (const [i, planned] of replies.entries()) {
      if ('ok' in planned) continue;
      const row = rows[r++]!;
      replies[i] = { ok: true, value: planned.complete === undefined ? planned.result : planned.complete(row) } as OrgReply;
    }
    const last = rows[rows.length - 1];
    if (last !== undefined) {
      this.lastSeq = last.seq;
      this.head = last.chainHash;
    }

    this.inflight++;
    // The next batch may start once this one is committed, or once its append settled at all
    // (an adapter that fails may never say "committed").
    let committed = rows.length === 0;
    const onCommitted = (ok = false): void => {
      if (committed) return;
      committed = true;
      this.uncommitted--;
      if (ok && this.snapshotWaiters.length > 0) this.resolveSnapshotWaiters();
    };
    if (!committed) this.uncommitted++;
    const appended: Promise<string | null> =
      rows.length === 0
        ? Promise.resolve(null)
        : this.bus.append(this.org, rows, expectedLastSeq, { onCommitted }).then(
            (outcome) => (outcome.ok ? null : 'the ledger was written by another writer'),
            (error: unknown) => ensureError(error).message,
          );
    void appended.then(() => onCommitted(false));
    this.tail = this.tail
      .then(() => appended)
      .then(async (failure) => {
        this.inflight--;
        if (failure === null && !this.broken) {
          batch.forEach((pending, i) => pending.resolve(replies[i] as OrgReply));
        } else {
          if (!this.broken) {
            this.broken = true;
            this.options.log.error({ org: this.org, error: failure }, 'ledger append failed');
          }
          for (const pending of batch) pending.resolve(UNAVAILABLE);
        }
        if ((this.broken || this.stale) && this.inflight === 0) await this.heal();
        this.pump();
      });
  }

  /** After a failed append: rebuild from the ledger; if even that fails, refuse what waits. */
  private async heal(): Promise<void> {
    try {
      await this.recover();
      this.broken = false;
      this.stale = false;
    } catch (error) {
      const waiting = this.queue;
      this.queue = [];
      if (error instanceof LedgerDamagedError) {
        // Nothing will heal it: refuse every write from now on, and stop trying.
        this.damaged = damagedRefusal(this.org, error.seq);
        this.options.log.error({ org: this.org, seq: error.seq }, DAMAGED);
        for (const pending of waiting) pending.resolve(this.damaged);
        return;
      }
      this.options.log.error({ org: this.org, error: ensureError(error).message }, 'recovery failed');
      for (const pending of waiting) pending.resolve(UNAVAILABLE);
      // Stay broken and try again in a second; commands that arrive meanwhile wait.
      this.tail = this.tail.then(() => new Promise((resolve) => setTimeout(resolve, 1000))).then(() => this.heal());
    }
  }

  private plan(command: OrgCommand, recordedAt: string, limits: WriterLimits): Planned<unknown> {
    switch (command.type) {
      case 'agent.register':
        return planRegister(this.state, command.agent, recordedAt, limits);
      case 'agent.update':
        return planUpdate(this.state, command.agentId, command.changes, recordedAt, limits);
      case 'event.ingest':
        return planIngest(this.state, command.event, this.options.policy, this.options.policyDigest, recordedAt, limits);
      case 'review.decide':
        return planReview(this.state, command.actionId, command.decision, command.reviewer, this.options.policy, recordedAt);
      case 'export.record':
        return planExport(this.state, command.export, recordedAt, limits);
    }
  }

  /** Rebuilds head, seq and agent state from the org's committed ledger. */
  private async recover(): Promise<void> {
    const recovery = new OrgRecovery(this.options.policy);
    for await (const chunk of this.bus.read(this.org, 1)) for (const row of chunk) recovery.apply(row);
    this.adopt(recovery);
  }

  private adopt(recovery: OrgRecovery): void {
    this.state = recovery.state;
    this.lastSeq = recovery.lastSeq;
    this.head = recovery.head;
    this.lastRecordedMs = recovery.lastMs;
  }

  /**
   * The writer's state as plain data, or null while anything is uncommitted (a checkpoint must
   * hold only what the ledger holds).
   */
  snapshot(): WriterSnapshot | null {
    // Batches are planned in order, so when none is uncommitted, everything in memory is
    // committed (perhaps not yet flushed: a checkpoint is written in a later transaction, so it
    // never outlives the rows it describes).
    if (this.uncommitted > 0 || this.broken || this.stale) return null;
    return writerSnapshot(this.state, this.lastSeq, this.head, this.lastRecordedMs);
  }

  /** The state at the next moment everything planned is committed (at once when idle). */
  nextSnapshot(): Promise<WriterSnapshot> {
    const now = this.snapshot();
    if (now !== null) return Promise.resolve(now);
    return new Promise((resolve) => this.snapshotWaiters.push(resolve));
  }

  private resolveSnapshotWaiters(): void {
    const snapshot = this.snapshot();
    if (snapshot === null) return;
    for (const resolve of this.snapshotWaiters.splice(0)) resolve(snapshot);
  }

  /** Resolves when nothing is waiting or uncommitted (after the front end stopped taking work). */
  async idle(): Promise<void> {
    while (this.inflight > 0 || this.queue.length > 0) {
      // Waiting commands are launched at the end of the turn (pumpLater), not by the tail; while
      // broken, the tail carries the recovery, so wait for it rather than poll.
      if (this.inflight === 0 && !this.broken && !this.stale) await new Promise((resolve) => setImmediate(resolve));
      else await this.tail;
    }
  }

  /** An actor whose state was rebuilt from a replay of the ledger (see OrgActors.onReplay). */
  static fromRecovery(org: string, bus: Bus, options: OrgActorOptions, recovery: OrgRecovery): OrgLedgerActor {
    const actor = new OrgLedgerActor(org, bus, options);
    actor.adopt(recovery);
    return actor;
  }
}
