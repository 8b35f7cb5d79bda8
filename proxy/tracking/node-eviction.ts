/**
 * Whether a node may evict keys for `maxmemory` (its `maxmemory` set and its `maxmemory-policy`
 * not `noeviction`). Redis evicts before the command that finds it over the limit runs and tells a
 * tracking client of the evicted keys before that command's reply; through the proxy the node's
 * feed tells it on another connection, so while any node may evict, a RESP3 client's replies wait
 * for the feeds (client-caching.ts). Asked of every node while anyone tracks (once a second, with
 * the feeds' check), and assumed at once when a CONFIG SET through the proxy names either setting.
 * The same check reads lazyfree-lazy-user-flush: whether a plain FLUSHALL is a SYNC one (Redis 7.4
 * tells its own tracking client of a SYNC flush before the reply, of an ASYNC one after it).
 */
import { BackendPool } from '../backend/pool';
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';

const QUERY_TIMEOUT_MS = 2000;
/** How long a CONFIG SET of maxmemory or its policy is taken as eviction on: the checks (every second) know by then. */
const ASSUMED_MS = 3000;

export class NodeEviction {
  /** Nodes that may evict, by address. */
  private readonly evicting = new Set<string>();
  /** Nodes with lazyfree-lazy-user-flush on (a FLUSHALL without SYNC or ASYNC is then ASYNC), by address. */
  private readonly lazyFlush = new Set<string>();
  /** Until when a CONFIG SET of maxmemory or its policy is assumed to turn eviction on (0: none). */
  private assumedUntil = 0;
  private checking = false;
  /** The nodes of the last check. */
  private known: string[] = [];

  constructor(private readonly pool: BackendPool) {}

  get mayEvict(): boolean {
    if (this.evicting.size > 0) return true;
    if (this.assumedUntil === 0) return false;
    if (Date.now() < this.assumedUntil) return true;
    this.assumedUntil = 0;
    return false;
  }

  /** A FLUSHALL or FLUSHDB without SYNC or ASYNC flushes asynchronously on some node. */
  get lazyUserFlush(): boolean {
    return this.lazyFlush.size > 0;
  }

  /** A CONFIG SET's arguments (`CONFIG SET p v ...`): maxmemory or maxmemory-policy named; lazyfree-lazy-user-flush taken at once. */
  configSet(args: readonly Buffer[]): void {
    for (let i = 2; i < args.length; i += 2) {
      const name = args[i].toString('latin1').toLowerCase();
      if (name === 'maxmemory' || name === 'maxmemory-policy') this.assumedUntil = Date.now() + ASSUMED_MS;
      if (name === 'lazyfree-lazy-user-flush' && i + 1 < args.length) {
        const on = args[i + 1].toString('latin1').toLowerCase() === 'yes';
        for (const a of this.known) (on ? this.lazyFlush.add(a) : this.lazyFlush.delete(a));
      }
    }
  }

  /** Asks `addresses` (every node reads may go to) for their settings; one check at a time. */
  async check(addresses: readonly string[]): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      this.known = [...addresses];
      await Promise.all(addresses.map((a) => this.checkNode(a)));
      for (const a of [...this.evicting]) if (!addresses.includes(a)) this.evicting.delete(a);
      for (const a of [...this.lazyFlush]) if (!addresses.includes(a)) this.lazyFlush.delete(a);
    } finally {
      this.checking = false;
    }
  }

  private async checkNode(address: string): Promise<void> {
    try {
      const reply = decodeReply(await request(this.pool.connection(address, 0), ['CONFIG', 'GET', 'maxmemory*', 'lazyfree-lazy-user-flush'], QUERY_TIMEOUT_MS));
      const fields = new Map<string, string>();
      // A RESP2 array of name, value pairs (the proxy's lanes speak RESP2).
      if (Array.isArray(reply)) for (let i = 0; i + 1 < reply.length; i += 2) fields.set(String(reply[i]), String(reply[i + 1]));
      const evicts = Number(fields.get('maxmemory') ?? 0) > 0 && (fields.get('maxmemory-policy') ?? 'noeviction') !== 'noeviction';
      if (evicts) this.evicting.add(address);
      else this.evicting.delete(address);
      if (fields.get('lazyfree-lazy-user-flush') === 'yes') this.lazyFlush.add(address);
      else this.lazyFlush.delete(address);
    } catch {
      // Unreachable now: what it said last stands.
    }
  }
}
