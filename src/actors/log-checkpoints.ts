import type { KeyObject } from 'node:crypto';
import { rootAt } from '../domain/merkle.js';
import type { LogEntry } from '../bus/messages.js';
import { checkpointText, noteKey, parseCheckpoint, rawPublicKey, signNote, signReceipt, type NoteKey, type Receipt } from '../domain/signed-note.js';
import { unsignedText } from '../domain/log-monitor.js';
import { ensureError } from '../errors.js';
import type { Logger } from '../log.js';
import type { MerkleTrees } from './merkle-trees.js';

export interface SignedCheckpoint {
  size: number;
  root: Buffer;
  /** The C2SP signed note. */
  note: string;
}

/** A signed checkpoint as nodes share it: its size and its note (the root is in the note). */
export interface PublishedCheckpoint {
  size: number;
  note: string;
}

/**
 * Where the nodes of a cluster publish their checkpoints, so that none serves a smaller one than
 * another has (each signs from its own replica, which may trail by a batch): the largest per org.
 */
export interface CheckpointBoard {
  /** The largest checkpoint of the org published, if any. */
  get(org: string): PublishedCheckpoint | undefined;
  /** Publishes one this node signed, off the request path (nothing if the board's is as large). */
  offer(org: string, checkpoint: PublishedCheckpoint): void;
  /**
   * Calls `listener` with each org's checkpoint as it changes on the board, synchronously: written
   * by any node, this one's own offers included. The listener must not throw (a throw would reach
   * the board's writer or watch). For the process's life: there is no unwatching.
   */
  watch(listener: (org: string, checkpoint: PublishedCheckpoint) => void): void;
}

/** Orgs a tick signs in one event-loop turn. */
const SIGN_PER_TURN = 16;

/**
 * The latest signed checkpoint of each org's tree (DESIGN §10), signed off the request path:
 * `tick`, every second, signs a new one for each org whose tree grew, so the latest covers every
 * record committed more than a second ago. The runtime also ticks once the trees have caught up
 * after a start. An org asked for before any tick signed it (in the second after its first record,
 * or never written) gets one signed then: once per org and process. In cluster mode, a larger
 * checkpoint of another node's is checked and signed again here as it reaches the board (see
 * adopted), or by the next tick if it arrived while the org's tree was catching up; a request signs
 * one only if it asks in between (the first second after a start or a catch-up).
 *
 * The origin is `<host of the base URL>/vigil/<org>`. Each note carries two signatures by the one
 * log key: under the origin as its name (as the checkpoint-v1 vector does, and as C2SP tools
 * expect a log's key to be named), and under the origin prefix `<host>/vigil`, the name of the
 * verifier key `GET /public/log-key` publishes, which so checks every org's checkpoints. A verifier
 * uses the line of the key it holds and ignores the other.
 */
export class LogCheckpoints {
  private readonly latest = new Map<string, SignedCheckpoint>();
  /**
   * The board's note of each org last judged, and what it gave (null: refused); each note is judged
   * once, and once more when this node's tree reaches its size if it was taken before (rootChecked).
   */
  private readonly fromBoard = new Map<string, { from: string; checkpoint: SignedCheckpoint | null; rootChecked: boolean }>();
  /** A tick is signing, turn by turn. */
  private signing = false;
  private readonly publicKey: Buffer;
  /** The key under the origin prefix: the one published. */
  readonly prefixKey: NoteKey;

  constructor(
    private readonly trees: MerkleTrees,
    private readonly key: KeyObject,
    private readonly host: string,
    private readonly log: Logger,
    /** Cluster mode's; null when embedded. */
    private readonly board: CheckpointBoard | null = null,
  ) {
    this.publicKey = rawPublicKey(key);
    this.prefixKey = noteKey(`${host}/vigil`, this.publicKey);
    board?.watch((org, shared) => this.judge(org, shared));
  }

  origin(org: string): string {
    return `${this.host}/vigil/${org}`;
  }

  /**
   * The org's latest checkpoint (signed by the last tick, so a request never waits for a
   * signature once the org has one); null while its tree catches up with the ledger. A checkpoint
   * is never signed for a size below one signed before (a monitor would take it for a rollback).
   */
  get(org: string): SignedCheckpoint | null {
    if (this.trees.catchingUp(org)) return null;
    try {
      const own = this.latest.get(org) ?? this.sign(org);
      const shared = this.board?.get(org);
      return (shared !== undefined && shared.size > own.size ? this.served(org, shared) : null) ?? own;
    } catch (error) {
      // A stored stripe found damaged while reading a root: the tree is being rebuilt (503 meanwhile).
      if (this.trees.catchingUp(org)) return null;
      throw error;
    }
  }

  /**
   * Judges a checkpoint of the board's ahead of any request for it: as it arrives, and at each tick
   * (one that arrived while the tree caught up, or one taken before this node's tree could check
   * its root). Nothing to judge when this node's own is as large, unless it took that note unchecked.
   */
  private judge(org: string, shared: PublishedCheckpoint | undefined): void {
    if (shared === undefined || this.trees.catchingUp(org)) return;
    const cached = this.fromBoard.get(org);
    const unchecked = cached?.from === shared.note && cached.checkpoint !== null && !cached.rootChecked;
    if (shared.size <= (this.latest.get(org)?.size ?? -1) && !unchecked) return;
    try {
      this.adopted(org, shared);
    } catch (error) {
      // A stored stripe found damaged while reading a root: the request that next asks says so.
      this.log.error({ org, err: ensureError(error) }, 'checking a checkpoint of the cluster\'s board failed');
    }
  }

  /** The board's checkpoint as judged (on the request path only if no tick or arrival judged it yet). */
  private served(org: string, shared: PublishedCheckpoint): SignedCheckpoint | null {
    const cached = this.fromBoard.get(org);
    return cached?.from === shared.note ? cached.checkpoint : this.adopted(org, shared);
  }

  /**
   * A larger checkpoint another node published, as this node serves it. The board is inside the
   * cluster, but nothing is served on its word: its text must be a checkpoint of this org's log,
   * and the note served is signed here again (Ed25519 is deterministic: the bytes the other node
   * signed, if it signed that text with the one key, and nothing the key did not sign). When this
   * node's tree is as large, the root must be its own; a note taken while the tree trailed it is
   * judged again once the tree has reached its size. A note that does not check is logged once and
   * this node's own checkpoint served.
   */
  private adopted(org: string, shared: PublishedCheckpoint): SignedCheckpoint | null {
    const cached = this.fromBoard.get(org);
    const ownRoot = this.trees.size(org) >= shared.size;
    if (cached?.from === shared.note && (cached.checkpoint === null || cached.rootChecked || !ownRoot)) return cached.checkpoint;
    const checkpoint = parseCheckpoint(unsignedText(shared.note));
    const own = ownRoot ? rootAt(this.trees.tree(org), shared.size) : null;
    const signed = checkpoint === null ? null : this.signedText(checkpoint.origin, checkpoint.size, checkpoint.root);
    const problem =
      checkpoint === null || checkpoint.origin !== this.origin(org) || checkpoint.size !== shared.size
        ? 'not a checkpoint of this org\'s log'
        : signed!.note !== shared.note
          ? 'not signed by this log\'s key'
          : own !== null && !own.equals(checkpoint.root)
            ? 'a root this node\'s tree does not have at that size'
            : null;
    if (problem !== null) {
      this.log.error({ org, size: shared.size, problem }, 'the cluster\'s checkpoint board holds a checkpoint this node will not serve; it serves its own');
      this.fromBoard.set(org, { from: shared.note, checkpoint: null, rootChecked: own !== null });
      return null;
    }
    this.fromBoard.set(org, { from: shared.note, checkpoint: signed, rootChecked: own !== null });
    return signed;
  }

  /**
   * A checkpoint of the org's tree at `size` (at most the tree's), signed now: what an export
   * bundle carries for its last seq. It does not become the latest.
   */
  signAt(org: string, size: number): SignedCheckpoint {
    return this.signed(org, size);
  }

  /** A signed receipt for a record's log entry (DESIGN §10): the JCS of the other four fields, signed. */
  receipt(org: string, entry: LogEntry): Receipt {
    const fields = { origin: this.origin(org), seq: entry.seq, leaf_hash: entry.leaf_hash, recorded_at: entry.recorded_at };
    return { ...fields, signature: signReceipt(fields, this.key) };
  }

  /**
   * Signs a checkpoint for every org whose tree grew since its last one, SIGN_PER_TURN orgs an
   * event-loop turn (each is a root and two Ed25519 signatures, ~0.1 ms): many orgs never hold the
   * loop for long. A tick while the last one is still signing is skipped.
   */
  tick(): void {
    if (this.signing) return;
    const orgs = [...this.trees.orgs()];
    this.signing = true;
    const next = (from: number): void => {
      for (const org of orgs.slice(from, from + SIGN_PER_TURN)) {
        try {
          if (!this.trees.catchingUp(org) && this.trees.size(org) > (this.latest.get(org)?.size ?? -1)) this.sign(org);
          if (this.board !== null) this.judge(org, this.board.get(org));
        } catch (error) {
          // One org's tree that cannot be read must neither stop the others' checkpoints nor the process.
          this.log.error({ org, err: ensureError(error) }, 'signing a checkpoint failed');
        }
      }
      if (from + SIGN_PER_TURN < orgs.length) setImmediate(next, from + SIGN_PER_TURN);
      else this.signing = false;
    };
    next(0);
  }

  private sign(org: string): SignedCheckpoint {
    const signed = this.signed(org, this.trees.size(org));
    this.latest.set(org, signed);
    this.board?.offer(org, { size: signed.size, note: signed.note });
    return signed;
  }

  private signed(org: string, size: number): SignedCheckpoint {
    return this.signedText(this.origin(org), size, rootAt(this.trees.tree(org), size));
  }

  /** The note of a checkpoint, with its two signatures. */
  private signedText(origin: string, size: number, root: Buffer): SignedCheckpoint {
    const text = checkpointText({ origin, size, root });
    const cosigned = signNote(text, this.prefixKey, this.key).slice(text.length + 1);
    return { size, root, note: signNote(text, noteKey(origin, this.publicKey), this.key) + cosigned };
  }
}
