// Jest helper: a client writing in a loop (SET PREFIX:i i, a few in flight at once) through a proxy
// while a test does something to it (sends a signal, reloads...). `progress(n)` waits for n more
// acknowledged writes; `stop()` ends the loop and says whether any write failed or went missing.
import Redis from 'ioredis';

export class WriteLoad {
  /** Writes answered OK. */
  acked = 0;
  /** Every failure, as the client saw it. */
  readonly errors: string[] = [];
  private next = 0;
  private stopping = false;
  private readonly loops: Promise<void>[];
  private readonly waiters = new Set<() => void>();
  private readonly client: Redis;

  private constructor(port: number, private readonly prefix: string, concurrency: number) {
    // No retries, no reconnection, no offline queue: a dropped connection or a lost reply is an error here.
    this.client = new Redis({
      port,
      maxRetriesPerRequest: 0,
      commandTimeout: 3000,
      disableClientInfo: true,
      enableReadyCheck: false,
      enableOfflineQueue: false,
      lazyConnect: true,
      retryStrategy: () => null,
    });
    this.loops = [];
    const connected = this.client.connect();
    for (let i = 0; i < concurrency; i++) this.loops.push(connected.then(() => this.loop()));
  }

  /** Starts writing to `port` with `concurrency` requests in flight. */
  static start(port: number, prefix: string, concurrency = 4): WriteLoad {
    return new WriteLoad(port, prefix, concurrency);
  }

  private async loop(): Promise<void> {
    while (!this.stopping && this.errors.length === 0) {
      const i = this.next++;
      try {
        const reply = await this.client.set(`${this.prefix}:${i}`, String(i));
        if (reply !== 'OK') this.errors.push(`SET ${this.prefix}:${i}: ${String(reply)}`);
        else this.acked++;
      } catch (err) {
        this.errors.push(`SET ${this.prefix}:${i}: ${err instanceof Error ? err.message : String(err)}`);
      }
      for (const w of this.waiters) w();
    }
  }

  /** Resolves once `n` more writes have been acknowledged; rejects at the first failed write or after `ms`. */
  progress(n: number, ms = 10_000): Promise<void> {
    const target = this.acked + n;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`${this.prefix}: ${this.acked} of ${target} writes acknowledged within ${ms} ms; errors: ${this.errors.join('; ')}`));
      }, ms);
      const check = (): void => {
        if (this.errors.length > 0) reject(new Error(`${this.prefix}: ${this.errors.join('; ')}`));
        else if (this.acked >= target) resolve();
        else return;
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  /**
   * Ends the loop (the writes in flight are answered first), then reads every key written back
   * through the proxy. Returns how many were written, the errors and the keys whose value is not theirs.
   */
  async stop(): Promise<{ written: number; errors: string[]; missing: string[] }> {
    this.stopping = true;
    await Promise.all(this.loops);
    const missing: string[] = [];
    try {
      for (let from = 0; from < this.next && this.errors.length === 0; from += 500) {
        const keys = Array.from({ length: Math.min(500, this.next - from) }, (_, j) => from + j);
        const results = (await keys.reduce((p, i) => p.get(`${this.prefix}:${i}`), this.client.pipeline()).exec()) ?? [];
        results.forEach(([err, v], j) => {
          if (err !== null || v !== String(keys[j])) missing.push(`${this.prefix}:${keys[j]}`);
        });
      }
    } finally {
      this.client.disconnect();
    }
    return { written: this.next, errors: this.errors, missing };
  }

  /** Disconnects without checking (afterAll, when a test failed midway). */
  abandon(): void {
    this.stopping = true;
    if (this.client.status !== 'end') this.client.disconnect();
  }
}
