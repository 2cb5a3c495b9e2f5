/**
 * Which org writers of a process have work (commands waiting or in flight), so that a writer can
 * tell whether it shares the disk's write queue with another org. Alone, a writer keeps two
 * batches in flight (one committing, the next queued behind it), which keeps the write thread busy;
 * beside another org it keeps one, so the other org's rows are queued behind at most one of its
 * batches, not two (fairness between tenants: a flood of one org costs another org's write about
 * one transaction of waiting).
 */
export class WriterShare {
  private readonly busy = new Set<string>();

  /** Records whether `org`'s writer has work now. */
  set(org: string, hasWork: boolean): void {
    if (hasWork) this.busy.add(org);
    else this.busy.delete(org);
  }

  /** Whether a writer other than `org`'s has work. */
  othersBusy(org: string): boolean {
    return this.busy.size > (this.busy.has(org) ? 1 : 0);
  }
}
