import type { KeyObject } from 'node:crypto';
import { rootAt } from '../domain/merkle.js';
import { checkpointText, noteKey, rawPublicKey, signNote, type NoteKey } from '../domain/signed-note.js';
import type { MerkleTrees } from './merkle-trees.js';

export interface SignedCheckpoint {
  size: number;
  root: Buffer;
  /** The C2SP signed note. */
  note: string;
}

/**
 * The latest signed checkpoint of each org's tree (DESIGN §10), signed off the request path:
 * `tick`, every second, signs a new one for each org whose tree grew, so the latest covers every
 * record committed more than a second ago. An org asked for before its first tick (just started,
 * or never written) gets one signed then.
 *
 * The origin is `<host of the base URL>/vigil/<org>`, and the key signs under the origin as its
 * name (as the checkpoint-v1 vector does), so each org's verifier key names its own log.
 */
export class LogCheckpoints {
  private readonly latest = new Map<string, SignedCheckpoint>();
  private readonly publicKey: Buffer;

  constructor(
    private readonly trees: MerkleTrees,
    private readonly key: KeyObject,
    private readonly host: string,
  ) {
    this.publicKey = rawPublicKey(key);
  }

  origin(org: string): string {
    return `${this.host}/vigil/${org}`;
  }

  noteKey(org: string): NoteKey {
    return noteKey(this.origin(org), this.publicKey);
  }

  /** The org's latest checkpoint; null while its tree catches up with the ledger (after a start) and has none yet. */
  get(org: string): SignedCheckpoint | null {
    return this.latest.get(org) ?? (this.trees.catchingUp(org) ? null : this.sign(org));
  }

  /** Signs a checkpoint for every org whose tree grew since its last one. */
  tick(): void {
    for (const org of this.trees.orgs()) {
      if (!this.trees.catchingUp(org) && this.trees.size(org) !== this.latest.get(org)?.size) this.sign(org);
    }
  }

  private sign(org: string): SignedCheckpoint {
    const tree = this.trees.tree(org);
    const root = rootAt(tree);
    const origin = this.origin(org);
    const signed = { size: tree.size, root, note: signNote(checkpointText({ origin, size: tree.size, root }), noteKey(origin, this.publicKey), this.key) };
    this.latest.set(org, signed);
    return signed;
  }
}
