/** One keyed frame: its key is the reply subject it belongs to. */
export type Keyed = [key: string, frame: Uint8Array];

/**
 * Frames bound for the same destination within one turn of the event loop, handed over together
 * (in the order added) when the turn's I/O is done (`setImmediate`): all the requests that arrived
 * in one poll of the sockets leave as one NATS message per destination. `flush` sends at once; a
 * coalescer made with `auto` false sends only then.
 */
export class Coalescer {
  private pending = new Map<string, Keyed[]>();
  private scheduled = false;

  constructor(
    private readonly send: (destination: string, entries: Keyed[]) => void,
    private readonly auto = true,
  ) {}

  add(destination: string, key: string, frame: Uint8Array): void {
    const entries = this.pending.get(destination);
    if (entries === undefined) this.pending.set(destination, [[key, frame]]);
    else entries.push([key, frame]);
    if (this.auto && !this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  flush(): void {
    const pending = this.pending;
    this.pending = new Map();
    this.scheduled = false;
    for (const [destination, entries] of pending) this.send(destination, entries);
  }
}
