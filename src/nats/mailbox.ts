import type { WireAnswer } from './command-wire.js';

/** What a request attempt can hear: the owner's answers, NATS's "no responders", its router closing, or nothing in time. */
export type Signal = WireAnswer | { t: 'no_responders' } | { t: 'closed' } | { t: 'silence' };

/** The signals of one reply subject, taken one at a time, each wait bounded. */
export class Mailbox {
  private readonly signals: Signal[] = [];
  private wake: (() => void) | null = null;

  push(signal: Signal): void {
    this.signals.push(signal);
    this.wake?.();
  }

  /** The next signal, or `silence` if none comes within `ms`. */
  async next(ms: number): Promise<Signal> {
    const queued = this.signals.shift();
    if (queued !== undefined) return queued;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, Math.max(0, ms));
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
    this.wake = null;
    return this.signals.shift() ?? { t: 'silence' };
  }
}
