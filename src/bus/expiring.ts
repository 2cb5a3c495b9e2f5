/** What a writer asks of a command before deciding it: is anyone still waiting for its answer? */
export interface Abandoned {
  readonly aborted: boolean;
}

/**
 * A command's abandonment as its writer sees it in cluster mode: the caller went away (`caller`,
 * or `gone()` told by a requester over the wire), or the command's deadline passed. A command
 * past its deadline is never decided: its requester has answered, or is about to answer, 503, so
 * deciding it then would record an outcome nobody can learn (and a retry would record it twice).
 */
export class Expiring implements Abandoned {
  private told = false;

  constructor(
    private readonly deadline: number,
    private readonly now: () => number,
    private readonly caller?: Abandoned,
  ) {}

  get aborted(): boolean {
    return this.told || this.caller?.aborted === true || this.now() > this.deadline;
  }

  /** The requester says its caller is gone. */
  gone(): void {
    this.told = true;
  }
}
