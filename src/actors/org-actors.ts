import type { RequestOptions } from '../bus/command-router.js';
import type { BatchHandler, LedgerLog } from '../bus/ledger-log.js';
import type { NotOwner, OrgReply, WriterCommand } from '../bus/messages.js';
import { OrgLedgerActor, type OrgActorOptions } from './org-ledger-actor.js';
import { DAMAGED, damagedRefusal, LedgerDamagedError, OrgRecovery, type WriterSnapshot } from './org-recovery.js';
import { ensureError, VigilError } from '../errors.js';
import { RepeatedFailure } from '../repeated-failure.js';

/**
 * Owns the org writers of this node and routes every command to its org's actor. At start-up the
 * writers are rebuilt from the same replay of the ledger that rebuilds the projections (one
 * pass: `onReplay`, then `finishReplay`); an org first seen later is recovered on its first
 * command. Commands that arrive while an actor is starting wait for it, in order.
 */
export class OrgActors {
  private readonly actors = new Map<string, OrgLedgerActor | Promise<OrgLedgerActor>>();

  private replaying: Map<string, OrgRecovery> | null;
  /** Orgs whose ledger has a row that cannot be read, with its seq: their writes are refused. */
  private readonly damaged = new Map<string, number>();
  /** Orgs whose writer failed to start, since it last started: what the log has said of it. */
  private readonly startFailures = new Map<string, RepeatedFailure>();

  constructor(
    private readonly log: LedgerLog,
    private readonly options: OrgActorOptions,
  ) {
    this.replaying = options.fromReplay === false ? null : new Map();
  }

  /** Feeds replayed committed batches (start-up only). */
  readonly onReplay: BatchHandler = ({ org, rows, fence }) => {
    if (this.replaying === null) return;
    let recovery = this.replaying.get(org);
    if (recovery === undefined) {
      recovery = new OrgRecovery(this.options.policy);
      this.replaying.set(org, recovery);
    }
    for (const row of rows) recovery.apply(row);
    recovery.fence = fence;
  };

  /** Each running writer's commands waiting or in flight, by org. */
  *depths(): IterableIterator<[string, number]> {
    for (const [org, actor] of this.actors) if (actor instanceof OrgLedgerActor) yield [org, actor.depth];
  }

  /** Seeds an org's replay from a checkpoint; the replay then continues after its seq. */
  restore(org: string, snapshot: WriterSnapshot): void {
    this.replaying?.set(org, OrgRecovery.from(this.options.policy, snapshot));
  }

  /**
   * Each running writer's state at its next fully committed moment, by org. With `drain`, first
   * waits until nothing is queued (for a clean stop, once the front end stopped taking work).
   */
  async snapshots(drain = false): Promise<Map<string, WriterSnapshot>> {
    const out = new Map<string, WriterSnapshot>();
    for (const [org, actor] of this.actors) {
      if (!(actor instanceof OrgLedgerActor)) continue;
      // A writer that cannot reach a committed moment (its disk failing) is skipped, not awaited.
      const snapshot = await withTimeout(
        (drain ? actor.idle() : Promise.resolve()).then(() => actor.nextSnapshot()),
        SNAPSHOT_WAIT_MS,
      );
      if (snapshot !== null) out.set(org, snapshot);
    }
    return out;
  }

  /** Turns the replayed state into running actors; later rows are theirs to write. */
  finishReplay(): void {
    if (this.replaying === null) return;
    for (const [org, recovery] of this.replaying) this.actors.set(org, OrgLedgerActor.fromRecovery(org, this.log, this.options, recovery));
    this.replaying = null;
  }

  /**
   * Refuses every write to `org` from now on: its ledger has an unreadable row at `seq`, and a
   * writer must not decide anything from a state it cannot rebuild. Reads are not affected.
   */
  markDamaged(org: string, seq: number): void {
    this.options.log.error({ org, seq }, DAMAGED);
    this.damaged.set(org, seq);
    this.replaying?.delete(org);
    this.actors.delete(org);
  }

  /**
   * Drops the writers of the orgs `which` selects (cluster mode: their partition changed hands),
   * retired (OrgLedgerActor.retire): what waits in them is answered `not_owner`, so the router
   * takes it to the new owner, and a recovery they retry stops. A writer still starting is
   * retired once started. A command that comes later starts its org's writer again from the
   * log, so it decides from the org's last batch; a batch a dropped writer still has in flight is
   * settled by the fence.
   */
  forget(which: (org: string) => boolean): void {
    for (const [org, actor] of [...this.actors]) {
      if (!which(org)) continue;
      this.actors.delete(org);
      if (actor instanceof OrgLedgerActor) actor.retire();
      else actor.then((started) => started.retire(), () => undefined);
    }
  }

  readonly handle = (command: WriterCommand, options?: RequestOptions): Promise<OrgReply | NotOwner> => {
    const damagedAt = this.damaged.get(command.org);
    if (damagedAt !== undefined) return Promise.resolve(damagedRefusal(command.org, damagedAt));
    const submit = (actor: OrgLedgerActor): Promise<OrgReply | NotOwner> =>
      command.type === 'events.ingest' ? actor.submitEvents(command, options?.abandoned) : actor.submit(command, options?.abandoned);
    const actor = this.actors.get(command.org);
    if (actor instanceof OrgLedgerActor) return submit(actor);
    return this.starting(command.org, actor).then(
      submit,
      (error: unknown) => {
        if (error instanceof LedgerDamagedError) return damagedRefusal(command.org, error.seq);
        throw error;
      },
    );
  };

  private starting(org: string, existing: Promise<OrgLedgerActor> | undefined): Promise<OrgLedgerActor> {
    if (existing !== undefined) return existing;
    const promise: Promise<OrgLedgerActor> = OrgLedgerActor.start(org, this.log, this.options).then(
      (actor) => {
        // Forgotten while it started: `forget` retires it, and a later start is not replaced.
        if (this.actors.get(org) !== promise) return actor;
        this.actors.set(org, actor);
        const failures = this.startFailures.get(org)?.clear() ?? 0;
        this.startFailures.delete(org);
        if (failures > 0) this.options.log.info({ org, failures }, 'writer started after failed starts');
        return actor;
      },
      (error: unknown) => {
        if (this.actors.get(org) === promise) this.actors.delete(org);
        if (error instanceof LedgerDamagedError) {
          this.markDamaged(org, error.seq);
        } else {
          this.startFailed(org, error);
        }
        // Reading the org's ledger failed (cluster mode: the stream did not answer): nothing was
        // decided, and the next command tries again.
        if (error instanceof VigilError || error instanceof LedgerDamagedError) throw error;
        throw new VigilError('unavailable', `the writer of org ${org} could not read its ledger (${ensureError(error).message}); nothing was recorded, retry`, undefined, { retryAfterSeconds: 1, cause: error });
      },
    );
    this.actors.set(org, promise);
    return promise;
  }

  /** Each command retries a failed start: the first failure, each new reason, and every 30th at most every 30 s are logged. */
  private startFailed(org: string, error: unknown): void {
    let failed = this.startFailures.get(org);
    if (failed === undefined) {
      failed = new RepeatedFailure(30, WRITER_START_REPEAT_MS);
      this.startFailures.set(org, failed);
    }
    const err = ensureError(error);
    if (failed.note(err.message)) this.options.log.warn({ org, failures: failed.failures, err }, 'writer could not start: reading its ledger failed; the next command tries again');
  }
}

const SNAPSHOT_WAIT_MS = 5_000;
/** A writer start failing the same way is logged again at most this often (each command retries it). */
const WRITER_START_REPEAT_MS = 30_000;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | null> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), ms);
    timer.unref();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      () => {
        clearTimeout(timer);
        resolve(null);
      },
    );
  });
}
