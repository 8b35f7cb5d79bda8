/**
 * tracking-table-max-keys: the proxy keeps its own tracking table (key-table.ts), so the limit is
 * the proxy's. CONFIG SET gives it (the nodes still take it too: dispatch/every-node.ts) and CONFIG
 * GET answers the proxy's value in place of the node's. Past it, keys are evicted as Redis 7.0's
 * trackingLimitUsedSlots evicts them: before the next command of any client, and from the cron.
 */
import { parseInteger } from '../commands/keys';
import { ClientIds, KeyTable } from './key-table';
import { withConfigValue } from '../resp/config-reply';

/** Redis checks the limit in serverCron too, 10 times a second (hz 10). */
const CRON_MS = 100;

/** `C`: a client of the proxy, whose command is about to run when keys are evicted. */
export class TableLimit<C> {
  private timer: NodeJS.Timeout | null = null;
  /** Redis's timeout_counter: checks in a row that ended still over the limit (each one tries harder). */
  private misses = 0;

  /** `evicted` tells the key's clients; `current` is whose command is about to run (null: the cron). */
  constructor(
    private readonly table: KeyTable,
    private readonly evicted: (key: Buffer, ids: ClientIds, current: C | null) => void,
  ) {}

  /**
   * Redis's trackingLimitUsedSlots: evicts keys until the table is back within the limit, at most
   * 100 x (1 + checks in a row that ended over it) this time.
   */
  enforce(current: C | null): void {
    if (!this.table.overLimit) {
      this.misses = 0;
      return;
    }
    for (let effort = 100 * (this.misses + 1); effort > 0; effort--) {
      const entry = this.table.evictOne();
      if (entry === undefined) break;
      this.evicted(Buffer.from(entry[0], 'latin1'), entry[1], current);
      if (!this.table.overLimit) {
        this.misses = 0;
        return;
      }
    }
    this.misses++;
  }

  /** While the table is over the limit, the cron's check: evictions reach idle clients too. */
  watch(): void {
    if (!this.table.overLimit || this.timer !== null) return;
    this.timer = setInterval(() => {
      this.enforce(null);
      if (!this.table.overLimit) this.stop();
    }, CRON_MS).unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}

const PARAM = 'tracking-table-max-keys';

/**
 * The value a `CONFIG SET param value ...` gives tracking-table-max-keys, or null when it names it
 * not, or with a value Redis refuses (not an integer from 0 to LONG_MAX: the nodes say so).
 */
export function maxKeysSet(args: readonly Buffer[]): number | null {
  let value: number | null = null;
  for (let i = 2; i + 1 < args.length; i += 2) {
    if (args[i].toString('latin1').toLowerCase() !== PARAM) continue;
    const n = parseInteger(args[i + 1]);
    value = n !== null && n >= 0 && Number.isSafeInteger(n) ? n : null;
  }
  return value;
}

/** A node's CONFIG GET reply with tracking-table-max-keys's value the proxy's. */
export function withMaxKeys(frame: Buffer, value: number): Buffer {
  return withConfigValue(frame, PARAM, String(value));
}
