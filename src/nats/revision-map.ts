/** A value and the KV revision (stream sequence) that wrote it. */
export interface Versioned<T> {
  value: T;
  revision: number;
}

/** Called after a key's value changed: `value` undefined when it was deleted. */
export type ChangeListener<T> = (key: string, value: T | undefined, previous: T | undefined) => void;

/**
 * The newest value of each key as far as this process knows, by KV revision. A write reaches it
 * twice, in either order: from the writer's ack and from the watch; and a watch that resumes may
 * hand over revisions already applied. So a change applies only if its revision is newer than the
 * key's: an older or equal one is dropped. A delete is kept as a tombstone with its revision, so a
 * late put older than the delete cannot bring the key back.
 */
export class RevisionMap<T> {
  private readonly entries = new Map<string, { value: T | undefined; revision: number }>();
  private live = 0;

  constructor(private readonly onChange?: ChangeListener<T>) {}

  /** The key's value (no allocation: the read path of every store). */
  value(key: string): T | undefined {
    return this.entries.get(key)?.value;
  }

  get(key: string): Versioned<T> | undefined {
    const entry = this.entries.get(key);
    return entry?.value === undefined ? undefined : { value: entry.value, revision: entry.revision };
  }

  /** Applies a put (`value`) or a delete (undefined) at `revision`; false if it is not newer. */
  apply(key: string, value: T | undefined, revision: number): boolean {
    const current = this.entries.get(key);
    if (current !== undefined && current.revision >= revision) return false;
    this.entries.set(key, { value, revision });
    const previous = current?.value;
    this.live += (value === undefined ? 0 : 1) - (previous === undefined ? 0 : 1);
    this.onChange?.(key, value, previous);
    return true;
  }

  /** The keys that hold a value, and their values. */
  *values(): IterableIterator<[string, T]> {
    for (const [key, { value }] of this.entries) if (value !== undefined) yield [key, value];
  }

  /** How many keys hold a value. */
  get size(): number {
    return this.live;
  }
}
