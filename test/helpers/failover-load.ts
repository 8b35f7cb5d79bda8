// Jest helper: clients writing through a proxy while a test fails a node over. Each of `clients`
// connections keeps one SET of a new key in flight (so at most `clients` commands are on the wire
// at any moment), and every outcome is kept: the key, when it was sent, how long the client waited,
// and the reply or error. ioredis is told never to retry or queue: what the proxy answers is what
// is recorded.
import Redis from 'ioredis';

export interface Outcome {
  key: string;
  sentAt: number;
  waitedMs: number;
  /** The error text, or null for OK. */
  error: string | null;
}

export class FailoverLoad {
  readonly outcomes: Outcome[] = [];
  private next = 0;
  private stopping = false;
  private readonly loops: Promise<void>[];
  private readonly clients: Redis[];
  private readonly waiters = new Set<() => void>();

  private constructor(port: number, private readonly prefix: string, clients: number) {
    this.clients = Array.from({ length: clients }, () =>
      new Redis({ port, maxRetriesPerRequest: 0, commandTimeout: 30_000, disableClientInfo: true, enableOfflineQueue: false, lazyConnect: true, retryStrategy: () => null }),
    );
    this.loops = this.clients.map((c) => c.connect().then(() => this.loop(c)));
  }

  static start(port: number, prefix: string, clients = 12): FailoverLoad {
    return new FailoverLoad(port, prefix, clients);
  }

  private async loop(client: Redis): Promise<void> {
    while (!this.stopping) {
      const key = `${this.prefix}:${this.next++}`;
      const sentAt = Date.now();
      let error: string | null = null;
      try {
        const reply = await client.set(key, key);
        if (reply !== 'OK') error = `unexpected reply ${String(reply)}`;
      } catch (err) {
        error = err instanceof Error ? err.message : String(err);
      }
      this.outcomes.push({ key, sentAt, waitedMs: Date.now() - sentAt, error });
      for (const w of this.waiters) w();
    }
  }

  /** Resolves once `n` more writes matching `which` have been answered OK (default: any). */
  acked(n: number, which: (o: Outcome) => boolean = () => true, timeoutMs = 30_000): Promise<void> {
    let seen = 0;
    const from = this.outcomes.length;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`only ${seen} of ${n} writes acknowledged within ${timeoutMs} ms; errors: ${this.errors().slice(0, 3).join('; ')}`));
      }, timeoutMs);
      let scanned = from;
      const check = (): void => {
        for (; scanned < this.outcomes.length; scanned++) {
          const o = this.outcomes[scanned];
          if (o.error === null && which(o)) seen++;
        }
        if (seen < n) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      this.waiters.add(check);
      check();
    });
  }

  errors(): string[] {
    return this.outcomes.filter((o) => o.error !== null).map((o) => `${o.key}: ${o.error}`);
  }

  /** Ends the loops once their requests in flight are answered, and closes the clients. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.loops.map((l) => l.catch(() => undefined)));
    for (const c of this.clients) c.disconnect();
  }
}
