/**
 * Full stripes of the tree's lowest levels (0 to HELD_LEVEL − 1), kept in memory for every org
 * together up to a byte budget (VIGIL_TREE_CACHE_MB), so that a proof reads nothing from storage.
 * Those levels hold 60 bytes a record (60 MB for a million: 32 of leaves, 28 above); past the
 * budget the stripe put in longest ago goes first. No bookkeeping on a hit: a proof's path is
 * random, so recency would buy little over insertion order.
 *
 * Each org's stripes are a table by level and index that its reader holds (`of`): a proof's ~20
 * lookups are array reads, not string keys built and hashed.
 */
export class StripeCache {
  private readonly orgs = new Map<string, (Buffer | undefined)[][]>();
  /** What was put, oldest first from `head` (an entry whose stripe is gone since is skipped). */
  private readonly order: { table: (Buffer | undefined)[][]; level: number; index: number }[] = [];
  private head = 0;
  private bytes = 0;

  constructor(readonly maxBytes: number) {}

  /** The org's stripes by level, then index: the cache's own table, kept current (a drop empties it in place). */
  of(org: string): readonly (readonly (Buffer | undefined)[])[] {
    return this.tableOf(org);
  }

  get(org: string, level: number, index: number): Buffer | undefined {
    return this.orgs.get(org)?.[level]?.[index];
  }

  /** Keeps `stripe` (which must not change), dropping the oldest past the budget; a stripe already held stays. */
  put(org: string, level: number, index: number, stripe: Buffer): void {
    if (stripe.length > this.maxBytes) return;
    const table = this.tableOf(org);
    const row = (table[level] ??= []);
    if (row[index] !== undefined) return;
    row[index] = stripe;
    this.order.push({ table, level, index });
    this.bytes += stripe.length;
    while (this.bytes > this.maxBytes && this.head < this.order.length) {
      const oldest = this.order[this.head++]!;
      const kept = oldest.table[oldest.level]?.[oldest.index];
      if (kept === undefined) continue;
      oldest.table[oldest.level]![oldest.index] = undefined;
      this.bytes -= kept.length;
    }
    // Reclaims the entries passed, now and then (not on every put).
    if (this.head >= 1024 && this.head * 2 >= this.order.length) {
      this.order.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Forgets every stripe of the org (its tree is rebuilt), and their bytes. */
  drop(org: string): void {
    const table = this.orgs.get(org);
    if (table === undefined) return;
    for (const row of table) for (const stripe of row ?? []) if (stripe !== undefined) this.bytes -= stripe.length;
    table.length = 0;
  }

  /** Whether `bytes` more fit in the budget without dropping a stripe. */
  hasRoom(bytes: number): boolean {
    return this.bytes + bytes <= this.maxBytes;
  }

  /** Bytes held. */
  get size(): number {
    return this.bytes;
  }

  private tableOf(org: string): (Buffer | undefined)[][] {
    let table = this.orgs.get(org);
    if (table === undefined) this.orgs.set(org, (table = []));
    return table;
  }
}
