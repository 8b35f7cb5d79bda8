/**
 * A cap on how fast the proxy opens back-end connections, so that a node restart, a failover or a
 * crowd of clients arriving at once cannot turn into a connection storm against Redis. A generic
 * cell rate algorithm: up to `burst` connects at once, then one every 1000/`perSecond` ms. Callers
 * do not block: reserve() books the next free turn and says how long to wait for it.
 */
export class ConnectLimiter {
  /** When the booked turns run out (the "theoretical arrival time"), in ms. */
  private bookedUntil = 0;
  private readonly intervalMs: number;
  private readonly toleranceMs: number;

  constructor(perSecond: number, burst: number, private readonly now: () => number = Date.now) {
    this.intervalMs = 1000 / perSecond;
    this.toleranceMs = (burst - 1) * this.intervalMs;
  }

  /** Books one connect; returns the delay in ms before it may start (0: now). */
  reserve(): number {
    const now = this.now();
    const start = Math.max(this.bookedUntil, now);
    this.bookedUntil = start + this.intervalMs;
    return Math.max(0, start - this.toleranceMs - now);
  }
}
