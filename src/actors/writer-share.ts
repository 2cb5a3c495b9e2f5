/**
 * The org writers of one process that share one disk (embedded mode): which of them have work,
 * and one event-loop turn for all of them.
 *
 * Which have work (commands waiting or in flight), so that a writer can tell whether it shares the
 * disk's write queue with another org. Alone, a writer keeps two batches in flight (one
 * committing, the next queued behind it), which keeps the write thread busy; beside another org it
 * keeps one, so the other org's rows are queued behind at most one of its batches, not two
 * (fairness between tenants: a flood of one org costs another org's write about one transaction of
 * waiting).
 *
 * One turn: every writer with commands to launch launches them from one callback at the end of the
 * event-loop turn (not one callback each), inside `together`, so that the log writes every org's
 * batch of the turn as one write (one LMDB transaction, each batch still fenced alone) the moment
 * the turn ends, as one org's batch is. Many orgs with a command or two each then cost the disk
 * what one org with all of them costs, and nothing is held back: the write starts when it would
 * have started for the first org.
 */
export class WriterShare {
  private readonly busy = new Set<string>();
  /** Launches of writers waiting for the end of this turn, in the order they asked. */
  private pumps: (() => void)[] = [];

  /** `together`: the log's (LedgerLog.together); without it each writer's appends are written alone. */
  constructor(private readonly together?: (run: () => void) => void) {}

  /** Records whether `org`'s writer has work now. */
  set(org: string, hasWork: boolean): void {
    if (hasWork) this.busy.add(org);
    else this.busy.delete(org);
  }

  /** Whether a writer other than `org`'s has work. */
  othersBusy(org: string): boolean {
    return this.busy.size > (this.busy.has(org) ? 1 : 0);
  }

  /**
   * Runs `pump` at the end of this event-loop turn with every other writer's that asked, in the
   * order they asked. A pump that throws (a broken invariant: a writer's launch catches its own
   * failures) does not keep the others from running; the first such error is thrown after them.
   */
  schedule(pump: () => void): void {
    this.pumps.push(pump);
    if (this.pumps.length === 1) setImmediate(this.runTurn);
  }

  private readonly runTurn = (): void => {
    const pumps = this.pumps;
    this.pumps = [];
    const failures: unknown[] = [];
    const run = (): void => {
      for (const pump of pumps) {
        try {
          pump();
        } catch (error) {
          failures.push(error);
        }
      }
    };
    if (this.together === undefined) run();
    else this.together(run);
    if (failures.length > 0) throw failures[0];
  };
}
