import type { NatsConnection } from '@nats-io/transport-node';
import type { IssueOutcome, ScoringKeyRecord, ScoringKeyStore, UseOutcome } from '../record-scoring/key-store.js';
import { KvMirror, type KvBucketOptions } from './kv-mirror.js';
import { kvToken } from './kv-key.js';
import { openAll } from './open-all.js';

export interface ScoringKeyBuckets {
  /** Default `vigil_scoring_keys`: each sandbox key's record under the `kvToken` of its e-mail address. */
  keys: string;
  /** Default `vigil_scoring_uses`: the n-th use of a key under `<kvToken(email)>.<n>`. */
  uses: string;
}

export const SCORING_KEY_BUCKETS: ScoringKeyBuckets = { keys: 'vigil_scoring_keys', uses: 'vigil_scoring_uses' };

/** One request taken from a key's allowance. */
interface UseClaim {
  at: string;
}

const UNKNOWN: UseOutcome = { ok: false, reason: 'unknown_key' };
const EXHAUSTED: UseOutcome = { ok: false, reason: 'exhausted' };

/**
 * KV adapter of ScoringKeyStore (cluster mode). Both writes are `kv.create`, a write conditional
 * on the key holding nothing, so of concurrent writes on any nodes exactly one wins:
 *
 * - `issue` creates the record under the key's e-mail address: the address is the unique index
 *   and the record one value, so nothing is left half written if a node dies.
 * - `use` claims the next use number: it creates `<email>.<n>` for n = uses seen + 1, and on
 *   losing n (another node took it) tries n + 1, up to the limit. Each loss is another use's win,
 *   so the loop ends, and the claims never pass the limit. The record is written once, as issued;
 *   `used` is its `used` plus the claims.
 *
 * Why not a compare-and-set of `used` with `kv.update(key, value, revision)`: on a replicated
 * bucket nats-server before 2.9.21 checks the expected revision only before proposing the write,
 * not in the replicated log, so concurrent updates at one revision can all succeed (nats-server
 * issue #4320; Debian's 2.9.10 let 12 concurrent uses of a 5-use key all through on R3). An
 * expected revision of 0, which is what `create` sends, is checked in the log on every version.
 *
 * A key issued or used on another node is seen here once the watch delivers it (milliseconds).
 */
export class KvScoringKeyStore implements ScoringKeyStore {
  private constructor(
    private readonly keys: KvMirror<ScoringKeyRecord>,
    private readonly uses: KvMirror<UseClaim>,
    /** hash → the address token the record is stored under */
    private readonly byHash: Map<string, string>,
    /** address token → uses claimed */
    private readonly used: Map<string, number>,
  ) {}

  static async open(nc: NatsConnection, options: KvBucketOptions & { buckets?: Partial<ScoringKeyBuckets> }): Promise<KvScoringKeyStore> {
    const byHash = new Map<string, string>();
    const used = new Map<string, number>();
    const [keys, uses] = await openAll([
      KvMirror.open<ScoringKeyRecord>(nc, {
        ...options,
        bucket: options.buckets?.keys ?? SCORING_KEY_BUCKETS.keys,
        onChange: (key, value, previous) => {
          if (previous !== undefined && previous.hash !== value?.hash) byHash.delete(previous.hash);
          if (value !== undefined) byHash.set(value.hash, key);
        },
      }),
      KvMirror.open<UseClaim>(nc, {
        ...options,
        bucket: options.buckets?.uses ?? SCORING_KEY_BUCKETS.uses,
        onChange: (key, value, previous) => {
          const owner = key.slice(0, key.lastIndexOf('.'));
          const count = (used.get(owner) ?? 0) + (value === undefined ? 0 : 1) - (previous === undefined ? 0 : 1);
          if (count > 0) used.set(owner, count);
          else used.delete(owner);
        },
      }),
    ]);
    return new KvScoringKeyStore(keys, uses, byHash, used);
  }

  get(hash: string): ScoringKeyRecord | undefined {
    const owner = this.byHash.get(hash);
    const record = owner === undefined ? undefined : this.keys.get(owner);
    return record === undefined ? undefined : { ...record, used: record.used + (this.used.get(owner!) ?? 0) };
  }

  async issue(record: ScoringKeyRecord): Promise<IssueOutcome> {
    const outcome = await this.keys.create(kvToken(record.email), record);
    return outcome.ok ? { ok: true } : { ok: false, reason: 'email_taken' };
  }

  async use(hash: string): Promise<UseOutcome> {
    const owner = this.byHash.get(hash);
    const record = owner === undefined ? undefined : this.keys.get(owner);
    if (owner === undefined || record === undefined) return UNKNOWN;
    for (let n = record.used + (this.used.get(owner) ?? 0) + 1; n <= record.limit; n++) {
      const claim = await this.uses.create(`${owner}.${n}`, { at: new Date().toISOString() });
      if (claim.ok) return { ok: true, used: n, remaining: record.limit - n };
    }
    return EXHAUSTED;
  }

  async close(): Promise<void> {
    await Promise.all([this.keys.close(), this.uses.close()]);
  }
}
