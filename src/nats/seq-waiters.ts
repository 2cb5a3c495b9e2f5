/**
 * Keyed reads waiting, per org, for a stream sequence of the org to land in the replica. `wait`
 * is bounded: past `ms` it rejects with `late()`'s error and leaves nothing behind.
 */
export class SeqWaiters {
  private readonly waiting = new Map<string, { seq: number; resolve: () => void }[]>();

  wait(org: string, seq: number, ms: number, late: () => Error): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        seq,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.remove(org, (w) => w === waiter);
        reject(late());
      }, Math.max(0, ms));
      this.waiting.set(org, [...(this.waiting.get(org) ?? []), waiter]);
    });
  }

  /** The org's batch at stream sequence `seq` landed: waits for it or an earlier one end. */
  reached(org: string, seq: number): void {
    for (const w of this.remove(org, (w) => w.seq <= seq)) w.resolve();
  }

  /** Takes the org's waiters that `gone` picks out, and returns them. */
  private remove(org: string, gone: (w: { seq: number }) => boolean): { seq: number; resolve: () => void }[] {
    const list = this.waiting.get(org);
    if (list === undefined) return [];
    const still = list.filter((w) => !gone(w));
    if (still.length > 0) this.waiting.set(org, still);
    else this.waiting.delete(org);
    return list.filter(gone);
  }
}
