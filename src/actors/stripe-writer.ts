import type { Stripe } from '../domain/striped-tree.js';
import { ensureError } from '../errors.js';
import type { Logger } from '../log.js';
import type { MerkleStore } from '../store/merkle-store.js';

/**
 * The filled stripes of every org's tree on their way to the Merkle store (MerkleTrees' write
 * side): held in memory, readable, until a write stores them; writes run one at a time, in the
 * order stripes were filled, so storage stays a prefix of each tree. A failed write leaves its
 * stripes held, tried again with the next write, so nothing is lost meanwhile.
 *
 * Live rows' stripes wait `delayMs` to be stored with those filled meanwhile: one write for the
 * stripes of a quarter of a second of live ingest, where a write each time one fills (a few hundred
 * a second, each its own LMDB commit and, with durability sync, fsync) took about a tenth of the
 * ledger's write rate. Lost in a crash, they are rebuilt from the ledger on the next start like
 * any stripe not stored.
 */
export class StripeWriter {
  /** Filled stripes not yet stored, by `org\0level/index`, in the order they were filled. */
  private readonly unstored = new Map<string, { org: string; stripe: Stripe }>();
  /** Orgs whose stored stripes are dropped with the next write, before any new ones (see forget). */
  private readonly dropping = new Set<string>();
  private writing: Promise<void> = Promise.resolve();
  private scheduled = false;
  /** Ends the delay a scheduled write is waiting out, if one is. */
  private now: (() => void) | null = null;
  private closing = false;

  constructor(
    private readonly store: MerkleStore,
    private readonly log: Logger,
  ) {}

  /** The org's stripe if it is filled and not stored yet (no key built while nothing is held). */
  held(org: string, level: number, index: number): Buffer | undefined {
    return this.unstored.size === 0 ? undefined : this.unstored.get(keyOf(org, level, index))?.stripe.bytes;
  }

  /** Holds filled stripes of the org, stored after `delayMs` with any filled meanwhile. */
  add(org: string, stripes: Iterable<Stripe>, delayMs: number): void {
    for (const stripe of stripes) this.unstored.set(keyOf(org, stripe.level, stripe.index), { org, stripe });
    if (this.unstored.size > 0) this.schedule(delayMs);
  }

  /** Forgets what is held of the org and drops what is stored of it with the next write (the tree is rebuilt). */
  forget(org: string): void {
    const prefix = keyOf(org, 0, 0).slice(0, org.length + 1);
    for (const key of [...this.unstored.keys()]) if (key.startsWith(prefix)) this.unstored.delete(key);
    this.dropping.add(org);
    this.schedule(0);
  }

  /** Resolves once every stripe held so far is stored (or its write has failed and will be tried again); a write waiting out its delay starts now. */
  settled(): Promise<void> {
    this.now?.();
    return this.writing;
  }

  /** Stores what is held and waits for it, writes after it without a delay: before the store closes. */
  close(): Promise<void> {
    this.closing = true;
    return this.settled();
  }

  private schedule(delayMs: number): void {
    if (this.scheduled) return;
    this.scheduled = true;
    this.writing = this.writing.then(() => this.delay(delayMs)).then(() => this.write());
  }

  private delay(ms: number): Promise<void> {
    if (ms <= 0 || this.closing) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.now?.(), ms);
      this.now = () => {
        clearTimeout(timer);
        this.now = null;
        resolve();
      };
    });
  }

  private async write(): Promise<void> {
    this.scheduled = false;
    const batch = [...this.unstored.entries()];
    const drop = [...this.dropping];
    try {
      await this.store.put(
        batch.map(([, entry]) => entry),
        drop,
      );
      // Only what was written: a rebuild meanwhile may have put a new stripe under the same key.
      for (const [key, entry] of batch) if (this.unstored.get(key) === entry) this.unstored.delete(key);
      for (const org of drop) this.dropping.delete(org);
    } catch (error) {
      this.log.error({ stripes: batch.length, err: ensureError(error) }, 'storing Merkle tree stripes failed; they stay in memory and are tried again with the next');
    }
  }
}

const keyOf = (org: string, level: number, index: number): string => `${org}\u0000${level}/${index}`;
