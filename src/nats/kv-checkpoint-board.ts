import type { CheckpointBoard, PublishedCheckpoint } from '../actors/log-checkpoints.js';
import { ensureError } from '../errors.js';
import { silentLogger, type Logger } from '../log.js';
import { KvMirror, type KvBucketOptions } from './kv-mirror.js';
import { fromKvToken, kvToken } from './kv-key.js';

/** Default bucket of the cluster's largest checkpoint per org. */
export const CHECKPOINT_BUCKET = 'vigil_checkpoints';

/**
 * The cluster's checkpoint board (see CheckpointBoard) in a KV bucket: under each org, the largest
 * checkpoint any node has signed. Each node signs from its own replica of the ledger, which can
 * trail another's by a batch; nodes serve the board's checkpoint when it is larger than their own,
 * so a reader behind a load balancer never sees the log shrink.
 *
 * Nodes sign the same bytes for the same size (the same key, origin and root; Ed25519 is
 * deterministic), so which node's note the board keeps does not matter, only that its size never
 * goes down: an offer is written only over a smaller one, by compare and set, and read back; one
 * that lost the race (or, on nats-server before 2.9.21, was overwritten by a smaller one racing it)
 * is written again while it is still the larger, so the board ends at the largest offered (a
 * reader may see a smaller one for the moment such a race lasts). Offers are off the request path; one per
 * org is in flight at a time, the newest waiting behind it.
 */
export class KvCheckpointBoard implements CheckpointBoard {
  /** Per org: an offer being written, and the newest to write after it. */
  private readonly writing = new Map<string, PublishedCheckpoint | null>();
  private readonly listeners: ((org: string, checkpoint: PublishedCheckpoint) => void)[] = [];
  private mirror!: KvMirror<PublishedCheckpoint>;

  private constructor(private readonly log: Logger) {}

  static async open(nc: Parameters<typeof KvMirror.open>[0], options: KvBucketOptions & { bucket?: string }): Promise<KvCheckpointBoard> {
    const board = new KvCheckpointBoard(options.log ?? silentLogger());
    board.mirror = await KvMirror.open<PublishedCheckpoint>(nc, {
      ...options,
      bucket: options.bucket ?? CHECKPOINT_BUCKET,
      onChange: (key, value) => {
        if (value !== undefined) for (const listener of board.listeners) listener(fromKvToken(key), value);
      },
    });
    return board;
  }

  watch(listener: (org: string, checkpoint: PublishedCheckpoint) => void): void {
    this.listeners.push(listener);
  }

  get(org: string): PublishedCheckpoint | undefined {
    return this.mirror.get(kvToken(org));
  }

  offer(org: string, checkpoint: PublishedCheckpoint): void {
    if ((this.get(org)?.size ?? -1) >= checkpoint.size) return;
    if (this.writing.has(org)) {
      const waiting = this.writing.get(org);
      if ((waiting?.size ?? -1) < checkpoint.size) this.writing.set(org, checkpoint);
      return;
    }
    this.writing.set(org, null);
    void this.write(org, checkpoint);
  }

  /** Resolves once no offer is being written (tests). */
  async settled(): Promise<void> {
    while (this.writing.size > 0) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  close(): Promise<void> {
    return this.mirror.close();
  }

  private async write(org: string, checkpoint: PublishedCheckpoint): Promise<void> {
    const key = kvToken(org);
    try {
      for (let attempt = 0; attempt < 5; attempt++) {
        const current = this.mirror.entry(key);
        if ((current?.value.size ?? -1) >= checkpoint.size) break;
        const outcome = current === undefined ? await this.mirror.create(key, checkpoint) : await this.mirror.update(key, checkpoint, current.revision);
        // Read back: lost to another node's write, or (nats-server before 2.9.21 does not check an
        // update's revision atomically on a replicated bucket) overwritten by a smaller one that
        // raced it; the loop then judges again.
        await this.mirror.latest(key);
        if (outcome.ok && (this.mirror.entry(key)?.value.size ?? -1) >= checkpoint.size) break;
      }
    } catch (error) {
      // The board only spares readers a smaller checkpoint from a trailing node; this node's own stays right.
      this.log.warn({ org, size: checkpoint.size, err: ensureError(error) }, 'publishing a checkpoint to the cluster failed');
    } finally {
      const next = this.writing.get(org) ?? null;
      this.writing.delete(org);
      if (next !== null) this.offer(org, next);
    }
  }
}
