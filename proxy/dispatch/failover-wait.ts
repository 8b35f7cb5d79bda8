/**
 * The wait of a request that did not reach a Sentinel master's ring server (nothing of it was
 * written, so nothing ran: the master refused the connection, died before the write, or moved
 * while a connection to it was being opened) for its successor, as a plain command's (forward.ts):
 * tried again after a backoff, at once when Sentinel names the new master, within the failover
 * wait (`ring.sentinel.failoverWaitMs`). Used by what forward.ts does not send: EXEC's burst, WATCH.
 */
import { ProxyContext } from '../context';

const RETRY_BASE_MS = 20;
const RETRY_CAP_MS = 500;

export class FailoverWait {
  private firstFailureAt = 0;
  private attempts = 0;

  constructor(private readonly ctx: ProxyContext) {}

  /** Whether `address` is a Sentinel master's server (requests for it wait for a failover). */
  applies(address: string): boolean {
    return this.ctx.sentinel?.waitWindowMs(address) != null;
  }

  /**
   * Schedules `again` and returns true while the wait for `address`'s successor lasts; false when
   * `address` is no Sentinel master's, or its wait is spent (then `gaveUp` words the error).
   */
  retry(address: string, again: () => void): boolean {
    const sentinel = this.ctx.sentinel;
    const window = sentinel?.waitWindowMs(address) ?? null;
    if (sentinel === null || window === null) return false;
    const now = Date.now();
    if (this.firstFailureAt === 0) this.firstFailureAt = now;
    if (now - this.firstFailureAt >= window) return false;
    this.ctx.stats.retries++;
    sentinel.retryAfter(address, Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** this.attempts++), again);
    return true;
  }

  /** The error once the wait is spent ("Sentinel named no new master within ..."), else `message`. */
  gaveUp(address: string, message: string): string {
    const sentinel = this.ctx.sentinel;
    return sentinel !== null && this.firstFailureAt !== 0 && sentinel.waitWindowMs(address) !== null ? sentinel.gaveUp(address, message) : message;
  }
}
