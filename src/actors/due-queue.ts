/**
 * A min-heap of (time, delivery id): the next attempt due first, and of two due at once the one
 * made first (ids grow). Stale entries are the caller's to skip.
 */
export class DueQueue {
  private readonly heap: { at: number; id: number }[] = [];

  get size(): number {
    return this.heap.length;
  }

  push(at: number, id: number): void {
    const h = this.heap;
    h.push({ at, id });
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i]!, h[parent]!)) break;
      [h[parent], h[i]] = [h[i]!, h[parent]!];
      i = parent;
    }
  }

  peek(): { at: number; id: number } | undefined {
    return this.heap[0];
  }

  pop(): void {
    const h = this.heap;
    const last = h.pop();
    if (last === undefined || h.length === 0) return;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && before(h[l]!, h[m]!)) m = l;
      if (r < h.length && before(h[r]!, h[m]!)) m = r;
      if (m === i) return;
      [h[m], h[i]] = [h[i]!, h[m]!];
      i = m;
    }
  }
}

function before(a: { at: number; id: number }, b: { at: number; id: number }): boolean {
  return a.at < b.at || (a.at === b.at && a.id < b.id);
}
