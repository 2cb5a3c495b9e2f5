/**
 * Progress of a long command on stderr (stdout stays the command's result, for scripts). On a
 * terminal one line is rewritten in place; elsewhere, only when asked (`--progress`), a line at
 * most once per interval. `done` ends it: the in-place line is cleared, or a last line is written.
 */
export class Progress {
  private last = 0;
  private shown = false;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly mode: 'terminal' | 'lines' | 'off',
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Progress on a terminal, or as lines when `forced`; off otherwise. */
  static forStderr(forced: boolean): Progress {
    const mode = process.stderr.isTTY ? 'terminal' : forced ? 'lines' : 'off';
    return new Progress(process.stderr, mode, mode === 'terminal' ? 250 : 1000);
  }

  /** Shows `text()` if the interval has passed since the last line (the text is built only then). */
  update(text: () => string): void {
    if (this.mode === 'off') return;
    const now = this.now();
    if (this.shown && now - this.last < this.intervalMs) return;
    this.last = now;
    this.shown = true;
    this.write(text());
  }

  /** Ends the progress: clears the terminal line, or writes `text` as the last line. */
  done(text: string): void {
    if (this.mode === 'lines') this.out.write(`${text}\n`);
    else this.clear();
  }

  /** Clears the terminal line (before other output), so the next update shows at once. */
  clear(): void {
    if (this.mode === 'terminal' && this.shown) this.out.write('\r\x1b[2K');
    this.shown = false;
  }

  private write(text: string): void {
    if (this.mode === 'terminal') this.out.write(`\r\x1b[2K${text}`);
    else this.out.write(`${text}\n`);
  }
}

/** 1234567 → "1.2 MB". */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]!}`;
}
