import type { Fence, LedgerLog } from '../bus/ledger-log.js';
import type { EventsIngestCommand, LedgerCommand, NotOwner, OrgReply, ReplyTo } from '../bus/messages.js';
import { GENESIS_HASH, type LedgerRow } from '../domain/ledger.js';
import { emptyOrgState, NO_LIMITS, type OrgState, type Refusal } from '../domain/org-state.js';
import { ensureError } from '../errors.js';
import { RepeatedFailure } from '../repeated-failure.js';
import { settlesWithin } from '../time-bound.js';
import { DAMAGED, damagedRefusal, LedgerDamagedError, OrgRecovery, writerSnapshot, type WriterSnapshot } from './org-recovery.js';
import { decideBatch, PLANNING_FAILED, type Queued } from './decide-batch.js';
import { eventGroup } from './event-group.js';
import type { OrgActorOptions } from './org-actor-options.js';
import { RecentKeys } from '../domain/idempotency.js';
import type { IdempotencyKeys } from './decide-batch.js';

interface Pending extends Queued {
  resolve: (reply: OrgReply | NotOwner) => void;
}

export type { OrgActorOptions };

/**
 * Beside another org's busy writer, a writer's batches are a quarter of maxBatch, one in flight: the
 * other org's rows then wait for at most one small transaction of this org's (measured with the
 * fairness bench: another org's p50 fell from 3.3 to 1.9 ms while this one floods, for a tenth less
 * of this one's throughput).
 */
const SHARED_BATCH_DIVISOR = 4;
/** Idempotency keys of durable rows a writer keeps in memory by default (see OrgActorOptions.recentKeysKept). */
const RECENT_KEYS_KEPT = 10_000;
const UNAVAILABLE: OrgReply = { ok: false, code: 'unavailable', message: 'the ledger could not be written; nothing was recorded, retry' };
/** An append refused by the fence: another writer appended first. */
const CONFLICT = 'the ledger was written by another writer';
/** The answer to commands that reach a retired writer: nothing of them was decided, the router takes them to the org's owner. */
const RETIRED: NotOwner = { ok: false, code: 'not_owner', message: 'this node no longer writes the org\'s ledger' };

/**
 * The single writer of one org's ledger. Holds the chain head, next seq and every agent's scoring
 * state in memory.
 *
 * Commands are decided strictly in arrival order. All commands that arrive in one event-loop turn
 * form one batch, appended with one write (group commit), up to `maxBatch` of them; a longer
 * backlog goes in batches of that size. On a log with pipelined appends, a batch is appended
 * without waiting for the one before it (the log orders them; LMDB's write thread folds those
 * that queue up into one transaction), up to `maxInflight` batches and `2 × maxBatch` commands not
 * yet durable; otherwise one at a time. So another org's write is queued for the disk behind at
 * most `2 × maxBatch` of this org's commands, however long its backlog (a flood of one org does
 * not grow the commits every org shares), and behind a quarter of `maxBatch` while the writers
 * know of each other (`share`). Each append presents the fence of the one before it,
 * so they commit in order or not at all. A caller is answered only once its batch, and every batch before it, is
 * durable, and what `afterAppend` stores for it is stored. If an append fails, that batch and every later one in flight are refused
 * and the state is rebuilt from the ledger before anything else is decided, so memory never runs
 * ahead of what is durable.
 */
export class OrgLedgerActor {
  private state: OrgState = emptyOrgState();
  private lastSeq = 0;
  /** What the next append presents (the log's token for the last batch launched). */
  private fence: Fence = 0;
  /**
   * The last seq whose afterAppend step has run. Rows before the writer started are the delivery
   * side's to replay from its own cursor; rows of an append that landed although it reported a
   * failure are found when the writer heals, and stored then.
   */
  private storedThrough = 0;
  /** An afterAppend outlived afterAppendMs and still runs: later batches are answered without waiting. */
  private storingLate = false;
  private head: Buffer = GENESIS_HASH;
  private lastRecordedMs = 0;
  private queue: Pending[] = [];
  private inflight = 0;
  /** Commands of the batches in flight. */
  private inflightCommands = 0;
  /** Settles when every launched batch has been answered, in launch order. */
  private tail: Promise<void> = Promise.resolve();
  private broken = false;
  /** Set by `retire`: this writer decides nothing more. */
  private retired = false;
  /** A command threw while planned: the state is rebuilt from the ledger before the next batch. */
  private stale = false;
  /** Set when a rebuild met an unreadable ledger row: every write is refused with it. */
  private damaged: Refusal | null = null;
  /** A pump is scheduled for the end of this event-loop turn. */
  private scheduled = false;
  private snapshotWaiters: ((snapshot: WriterSnapshot) => void)[] = [];
  /** Recoveries that failed in a row (retried every second): logged the first, on a new reason, and every 30th. */
  private readonly healFailures = new RepeatedFailure();
  private readonly maxInflight: number;
  private readonly maxBatch: number;
  /** On a log with pipelined appends: the fence an append will return, known before it is made. */
  private readonly foretell: ((rows: readonly LedgerRow[]) => Fence) | undefined;
  /** Idempotency keys decided lately here (not all in the store yet), then the store's index. */
  private readonly recentKeys: RecentKeys;
  private readonly keys: IdempotencyKeys = {
    find: (key) => this.recentKeys.get(key) ?? this.options.findKey?.(this.org, key),
    add: (key, keyed) => this.recentKeys.add(key, keyed),
  };

  private constructor(
    readonly org: string,
    private readonly log: LedgerLog,
    private readonly options: OrgActorOptions,
  ) {
    const pipelined = log.capabilities.includes('pipelined-appends');
    if (pipelined && log.fenceAfter === undefined) throw new Error('a log with pipelined appends must foretell its fences (fenceAfter)');
    this.foretell = pipelined ? log.fenceAfter?.bind(log) : undefined;
    this.maxInflight = pipelined ? (options.maxInflight ?? 8) : 1;
    this.maxBatch = options.maxBatch ?? Infinity;
    this.recentKeys = new RecentKeys(options.recentKeysKept ?? RECENT_KEYS_KEPT);
  }

  static async start(org: string, log: LedgerLog, options: OrgActorOptions): Promise<OrgLedgerActor> {
    const actor = new OrgLedgerActor(org, log, options);
    await actor.recover();
    actor.storedThrough = actor.lastSeq;
    return actor;
  }

  submit(command: LedgerCommand, abandoned?: { readonly aborted: boolean }): Promise<OrgReply | NotOwner> {
    const refused = this.refusal(1);
    if (refused !== null) return Promise.resolve(refused);
    return new Promise((resolve) => {
      this.queue.push({ command, resolve, abandoned });
      this.queued();
    });
  }

  /** The events of one command, queued one by one (each decided alone), answered together (see eventGroup). */
  submitEvents(command: EventsIngestCommand, abandoned?: { readonly aborted: boolean }): Promise<ReplyTo<EventsIngestCommand> | NotOwner> {
    const { events, receipt } = command;
    const refused = this.refusal(events.length);
    if (refused !== null) return Promise.resolve(refused);
    if (events.length === 0) return Promise.resolve({ ok: true, value: [] });
    return new Promise((resolve) => {
      const replyTo = eventGroup(events.length, resolve);
      for (let i = 0; i < events.length; i++) {
        this.queue.push({ command: { type: 'event.ingest', org: this.org, event: events[i]!, ...(receipt === true ? { receipt } : {}) }, resolve: replyTo(i), abandoned });
      }
      this.queued();
    });
  }

  /** Why `count` more commands are refused before they are queued, or null. */
  private refusal(count: number): Refusal | NotOwner | null {
    if (this.retired) return RETIRED;
    if (this.damaged !== null) return this.damaged;
    if (this.queue.length + count > this.options.maxPending) return { ok: false, code: 'overloaded', message: `org ${this.org} has too many commands waiting` };
    return null;
  }

  private queued(): void {
    this.showWork();
    this.pumpAtTurnEnd();
  }

  /**
   * Tells the other writers (WriterShare) whether this one has work it can append. One that
   * cannot (broken: its recovery fails or has not finished; retired) has none, however many
   * commands wait in it: else every other writer would keep to small batches for as long as it
   * stays broken.
   */
  private showWork(): void {
    this.options.share?.set(this.org, this.depth > 0 && !this.broken && !this.retired);
  }

  /**
   * This node no longer writes the org (cluster mode: its partition moved, OrgActors.forget).
   * Every command still waiting is answered `not_owner` (nothing of it was decided: the router
   * takes it to the org's owner), later ones too, and a recovery retried every second stops. A
   * batch already in flight is settled by the fence and answered as usual.
   */
  retire(): void {
    this.retired = true;
    for (const pending of this.queue.splice(0)) pending.resolve(RETIRED);
    this.showWork();
  }

  /** Launches what waits at the end of this event-loop turn: with the other writers' launches where they share a disk (WriterShare). */
  private pumpAtTurnEnd(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    if (this.options.share === undefined) setImmediate(this.pumpLater);
    else this.options.share.schedule(this.pumpLater);
  }

  /** Commands waiting or in flight (GET /metrics' writer queue depth). */
  get depth(): number {
    return this.queue.length + this.inflightCommands;
  }

  /** Every command that arrives in one event-loop turn joins one batch (up to maxBatch). */
  private readonly pumpLater = (): void => {
    this.scheduled = false;
    this.pump();
  };

  private pump(): void {
    while (!this.retired && !this.broken && !this.stale && this.inflight < this.maxInflight && this.queue.length > 0) {
      // Alone, at most two full batches in flight: one being committed while the next waits its
      // turn. Beside another org's busy writer, one small one (SHARED_BATCH_DIVISOR).
      const shared = this.options.share?.othersBusy(this.org) === true;
      const size = shared ? Math.max(1, Math.floor(this.maxBatch / SHARED_BATCH_DIVISOR)) : this.maxBatch;
      const room = shared ? size : 2 * this.maxBatch;
      if (this.inflightCommands + Math.min(this.queue.length, size) > room) return;
      const batch = this.queue.length <= size ? this.queue : this.queue.slice(0, size);
      this.queue = batch === this.queue ? [] : this.queue.slice(size);
      try {
        this.launch(batch);
      } catch (error) {
        // Past the per-command guard (limits, batch hashing): a broken invariant. The batch is
        // refused, and the state (perhaps changed by its planning) rebuilt before the next one.
        this.options.log.error({ org: this.org, err: ensureError(error) }, 'batch refused: launching it failed');
        for (const pending of batch) pending.resolve(PLANNING_FAILED);
        this.stale = true;
        if (this.inflight === 0) this.tail = this.tail.then(() => this.heal()).then(() => this.resume());
        return;
      }
    }
  }

  private launch(batch: Pending[]): void {
    const recordedMs = Math.max(this.options.now(), this.lastRecordedMs);
    this.lastRecordedMs = recordedMs;
    const recordedAt = new Date(recordedMs).toISOString();
    const limits = this.options.limits?.(this.org, recordedMs) ?? NO_LIMITS;
    const { replies, rows, failure } = decideBatch(this.state, batch, {
      head: this.head,
      nextSeq: this.lastSeq + 1,
      recordedAt,
      limits,
      policy: this.options.policy,
      policyDigest: this.options.policyDigest,
      sha256Rows: this.options.sha256Rows ?? null,
      keys: this.keys,
    });
    if (failure !== null) {
      // A command the rules cannot handle is refused alone. It may have changed the state before
      // it threw, so the rest of the batch waits until the state is rebuilt from the ledger (when
      // nothing is in flight), and the writer goes on from there.
      const failed = batch[replies.length - 1]!;
      this.options.log.error({ org: this.org, type: failed.command.type, err: ensureError(failure.error) }, 'command refused: planning failed');
      this.stale = true;
      this.queue = batch.splice(replies.length).concat(this.queue);
    }
    const last = rows[rows.length - 1];
    const expected = this.fence;
    if (last !== undefined) {
      this.lastSeq = last.seq;
      this.head = last.chainHash;
      if (this.foretell !== undefined) this.fence = this.foretell(rows);
    }
    // A checkpoint asked for meanwhile gets the state as of this batch, once it is durable (not
    // when a command's failed planning may have left the state half-changed).
    const waiters = this.stale ? [] : this.snapshotWaiters.splice(0);
    const snapshot = waiters.length > 0 ? this.snapshotNow() : null;

    this.inflight++;
    this.inflightCommands += batch.length;
    const started = this.options.committed === undefined ? 0 : performance.now();
    const appended: Promise<string | Fence> =
      rows.length === 0
        ? Promise.resolve(expected)
        : this.log.append(this.org, rows, expected).then(
            (outcome) => (outcome.ok ? outcome.fence : CONFLICT),
            (error: unknown) => ensureError(error).message,
          );
    this.tail = this.tail
      .then(() => appended)
      .then(async (result) => {
        this.inflight--;
        this.inflightCommands -= batch.length;
        if (typeof result === 'number' && !this.broken) {
          if (rows.length > 0) this.options.committed?.(rows.length, (performance.now() - started) / 1000);
          if (this.foretell === undefined) this.fence = result;
          if (rows.length > 0) await this.stored(rows);
          if (rows.length > 0) this.recentKeys.durableThrough(rows[rows.length - 1]!.seq);
          batch.forEach((pending, i) => pending.resolve(replies[i]!));
          for (const resolve of waiters) resolve({ ...snapshot!, fence: result });
        } else {
          if (!this.broken) {
            this.broken = true;
            this.showWork();
            this.options.log.error({ org: this.org, error: result }, 'ledger append failed');
          }
          // Refused by the fence, nothing of the batch was written: where another node owns the
          // org now (cluster mode) the router takes the commands there.
          const refusal = result === CONFLICT ? (this.options.onConflict ?? UNAVAILABLE) : UNAVAILABLE;
          for (const pending of batch) pending.resolve(refusal);
          this.snapshotWaiters.push(...waiters);
        }
        if ((this.broken || this.stale) && this.inflight === 0) await this.heal();
        this.resume();
      });
  }

  /** After a batch settled or a recovery: checkpoints waiting get the state, and waiting commands go. */
  private resume(): void {
    if (this.inflight === 0 && this.snapshotWaiters.length > 0) this.resolveSnapshotWaiters();
    // Beside other writers, what waits goes with theirs at the end of the turn (one write for the
    // batches of every org whose appends settled meanwhile), not in a write of its own now.
    if (this.options.share === undefined) this.pump();
    else if (this.queue.length > 0) this.pumpAtTurnEnd();
    this.showWork();
  }

  /** Waits for what afterAppend stores because of these rows; its failure is only logged. */
  private async stored(rows: readonly LedgerRow[]): Promise<void> {
    try {
      const storing = this.options.afterAppend?.(this.org, rows);
      const bound = this.options.afterAppendMs;
      if (storing === undefined) {
        // nothing to wait for
      } else if (bound === undefined) {
        await storing;
      } else if (this.storingLate) {
        // One that outlived its bound still runs: later batches do not wait at all (and it fails alone, logged).
        storing.catch((error: unknown) => this.options.log.error({ org: this.org, err: ensureError(error) }, 'storing what a committed batch causes failed'));
      } else if ((await settlesWithin(storing, bound)) === 'late') {
        this.options.log.warn({ org: this.org, seq: rows[rows.length - 1]!.seq, ms: bound }, 'storing what a committed batch causes did not finish in time; answering without waiting for it');
        this.storingLate = true;
        const settled = (): void => {
          this.storingLate = false;
        };
        storing.then(settled, (error: unknown) => {
          settled();
          this.options.log.error({ org: this.org, err: ensureError(error) }, 'storing what a committed batch causes failed');
        });
      }
    } catch (error) {
      this.options.log.error({ org: this.org, err: ensureError(error) }, 'storing what a committed batch causes failed');
    }
    this.storedThrough = rows[rows.length - 1]!.seq;
  }

  /** After a failed append: rebuild from the ledger; if even that fails, refuse what waits. */
  private async heal(): Promise<void> {
    if (this.retired) return;
    try {
      // An append that reported a failure may still have landed (a flush that failed after the
      // commit, an acknowledgement lost on the way): its rows are in the ledger, and what they
      // cause is stored now, before anything else is decided.
      const landed = await this.recover(this.storedThrough);
      // Keys of batches that were not written are free again (landed ones are in the store now).
      this.recentKeys.dropAbove(this.lastSeq);
      if (landed.length > 0) await this.stored(landed);
      this.broken = false;
      this.stale = false;
      const failures = this.healFailures.clear();
      if (failures > 0) this.options.log.info({ org: this.org, failures }, 'recovered after failed recoveries');
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
      const err = ensureError(error);
      if (this.healFailures.note(err.message)) this.options.log.error({ org: this.org, failures: this.healFailures.failures, err }, 'recovery failed');
      for (const pending of waiting) pending.resolve(this.retired ? RETIRED : UNAVAILABLE);
      if (this.retired) return;
      // Stay broken and try again in a second; commands that arrive meanwhile wait, and are
      // launched as soon as a retry heals (nothing else would: a submit pumps only as it comes).
      this.tail = this.tail
        .then(() => new Promise((resolve) => setTimeout(resolve, 1000)))
        .then(() => this.heal())
        .then(() => this.resume());
    }
  }

  /** Rebuilds head, seq, fence and agent state from the org's committed ledger; returns its rows after `after`. */
  private async recover(after = Number.MAX_SAFE_INTEGER): Promise<LedgerRow[]> {
    const recovery = new OrgRecovery(this.options.policy);
    const later: LedgerRow[] = [];
    for await (const batch of this.log.read(this.org, 1)) {
      for (const row of batch.rows) {
        recovery.apply(row);
        if (row.seq > after) later.push(row);
      }
      recovery.fence = batch.fence;
    }
    this.adopt(recovery);
    return later;
  }

  private adopt(recovery: OrgRecovery): void {
    this.state = recovery.state;
    this.lastSeq = recovery.lastSeq;
    this.head = recovery.head;
    this.lastRecordedMs = recovery.lastMs;
    this.fence = recovery.fence;
  }

  /**
   * The writer's state as plain data, or null while a batch is in flight (a checkpoint must hold
   * only what the ledger holds).
   */
  snapshot(): WriterSnapshot | null {
    if (this.inflight > 0 || this.broken || this.stale) return null;
    return this.snapshotNow();
  }

  private snapshotNow(): WriterSnapshot {
    return writerSnapshot(this.state, this.lastSeq, this.head, this.lastRecordedMs, this.fence);
  }

  /**
   * The state as of the next batch launched (or now, when idle), once that batch is durable: under
   * steady load the writer is never idle, yet every batch gives a consistent moment.
   */
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
  static fromRecovery(org: string, log: LedgerLog, options: OrgActorOptions, recovery: OrgRecovery): OrgLedgerActor {
    const actor = new OrgLedgerActor(org, log, options);
    actor.adopt(recovery);
    actor.storedThrough = actor.lastSeq;
    return actor;
  }
}

