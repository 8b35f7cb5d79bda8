/**
 * Progress of a long `migrate` run: a bar redrawn in place on a terminal (keys, keys/s, ETA),
 * plain lines (at most one per interval) when the output is a file or a pipe.
 */
export class Progress {
  private readonly started = Date.now();
  private lastLine = 0;
  private done = 0;
  private extra = '';

  constructor(
    private readonly label: string,
    private total: number,
    private readonly out: NodeJS.WriteStream = process.stderr,
    private readonly lineIntervalMs = 1000,
  ) {}

  /** The total as it becomes known (a full sync's snapshots tell theirs as they arrive). */
  retotal(total: number): void {
    this.total = total;
  }

  update(done: number, extra = ''): void {
    this.done = done;
    this.extra = extra;
    if (this.done > this.total) this.total = this.done;
    const now = Date.now();
    if (this.out.isTTY === true) {
      if (now - this.lastLine < 100) return;
      this.lastLine = now;
      this.out.write(`\r${this.text(true)}\x1b[K`);
    } else if (now - this.lastLine >= this.lineIntervalMs) {
      this.lastLine = now;
      this.out.write(`${this.text(false)}\n`);
    }
  }

  finish(): void {
    this.out.write(this.out.isTTY === true ? `\r${this.text(true)}\x1b[K\n` : `${this.text(false)}\n`);
  }

  private text(bar: boolean): string {
    const secs = Math.max(0.001, (Date.now() - this.started) / 1000);
    const rate = this.done / secs;
    const left = Math.max(0, this.total - this.done);
    const eta = rate > 0 ? `${Math.ceil(left / rate)}s` : '?';
    const pct = this.total > 0 ? Math.min(100, Math.floor((this.done / this.total) * 100)) : 100;
    const width = 30;
    const filled = Math.round((pct / 100) * width);
    const head = bar ? `${this.label} [${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${pct}%` : `${this.label}: ${pct}%`;
    return `${head} ${this.done}/${this.total} keys, ${Math.round(rate)} keys/s, ETA ${eta}${this.extra === '' ? '' : `, ${this.extra}`}`;
  }
}

/** Caps a loop at `perSecond` items per second (0: no cap). */
export class RateLimiter {
  private readonly started = Date.now();
  private taken = 0;

  constructor(private readonly perSecond: number) {}

  async take(n: number): Promise<void> {
    this.taken += n;
    if (this.perSecond <= 0) return;
    const due = this.started + (this.taken / this.perSecond) * 1000;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
}
