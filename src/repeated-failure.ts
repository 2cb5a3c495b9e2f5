/**
 * Which failures of a step retried until it succeeds deserve a log line: the first, every one
 * whose message differs from the last one logged (numbers aside, so a count or sequence that moves
 * on each try does not make every try a line), and every `every`th, but no oftener than `minMs`
 * apart for the same reason (a step retried by every request fails hundreds of times a second).
 * A step retried every second that fails the same way for an hour then costs two lines a
 * minute, and one that starts failing differently says why at once.
 */
export class RepeatedFailure {
  private count = 0;
  private logged: string | null = null;
  private loggedAt = -Infinity;

  constructor(
    private readonly every = 30,
    private readonly minMs = 0,
    private readonly now: () => number = Date.now,
  ) {}

  /** Failures since the last success. */
  get failures(): number {
    return this.count;
  }

  /** Notes one failure; true if it is to be logged. */
  note(message: string): boolean {
    const shape = message.replace(/\d+/g, '#');
    const now = this.now();
    const log = shape !== this.logged || (this.count % this.every === 0 && now - this.loggedAt >= this.minMs);
    this.count++;
    if (log) {
      this.logged = shape;
      this.loggedAt = now;
    }
    return log;
  }

  /** The step succeeded: returns how many failures came before, and starts over. */
  clear(): number {
    const failures = this.count;
    this.count = 0;
    this.logged = null;
    this.loggedAt = -Infinity;
    return failures;
  }
}
