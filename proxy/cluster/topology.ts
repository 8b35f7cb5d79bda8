/**
 * The current slot map of a Redis Cluster, discovered from seed nodes and kept current.
 *
 * Refreshes are single-flight (one CLUSTER SLOTS round at a time; callers share its result) and are
 * triggered by MOVED, by a lost back-end connection and by a timer. Each refresh asks the known
 * masters first, then the seeds, and takes the first good answer; a MOVED in between patches the
 * map for one slot (SlotMap.withSlotMoved) until the next refresh replaces it whole.
 */
import { BackendPool } from '../backend/pool';
import { request } from '../backend/request';
import { splitAddress } from '../backend/connection';
import { decodeReply, errorText } from '../resp/decode-reply';
import { SlotMap } from './slot-map';
import { log } from '../telemetry/log';
import { SlotOwners } from '../../sharding/key-space';

export interface TopologyOptions {
  seeds: readonly string[];
  refreshIntervalMs: number;
  queryTimeoutMs: number;
}

/** Refreshes asked for within this long of the last one are folded into one. */
const MIN_REFRESH_GAP_MS = 100;

export class ClusterTopology implements SlotOwners {
  private map: SlotMap = SlotMap.empty();
  private inflight: Promise<SlotMap> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private pendingTimer: NodeJS.Timeout | null = null;
  private lastRefreshAt = 0;
  private changeListeners: ((map: SlotMap) => void)[] = [];
  private movedListeners: ((slot: number, address: string) => void)[] = [];
  private stopped = false;

  constructor(private readonly pool: BackendPool, private readonly options: TopologyOptions) {}

  get current(): SlotMap {
    return this.map;
  }

  ownerOf(slot: number): string | null {
    return this.map.ownerOf(slot);
  }

  masterAddresses(): readonly string[] {
    return this.map.masters.map((m) => m.address);
  }

  onChange(listener: (map: SlotMap) => void): void {
    this.changeListeners.push(listener);
  }

  /** Resolves once a slot map has been loaded; until then retries every known seed with backoff. */
  async start(): Promise<void> {
    let delay = 100;
    for (;;) {
      if (this.stopped) throw new Error('stopped before the cluster topology was loaded');
      try {
        await this.refresh();
        break;
      } catch (err) {
        log.error({ seeds: this.options.seeds, err: (err as Error).message, retryInMs: delay }, 'cannot load the cluster topology from any seed; retrying');
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5000);
      }
    }
    this.timer = setInterval(() => this.requestRefresh(), this.options.refreshIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    if (this.pendingTimer !== null) clearTimeout(this.pendingTimer);
  }

  /** Called when a MOVED patched the map (which, unlike a refresh, does not call onChange's listeners). */
  onMoved(listener: (slot: number, address: string) => void): void {
    this.movedListeners.push(listener);
  }

  /** MOVED: the slot lives at `address` now. */
  applyMoved(slot: number, address: string): void {
    const before = this.map;
    this.map = this.map.withSlotMoved(slot, address);
    if (this.map !== before) for (const l of this.movedListeners) l(slot, address);
    this.requestRefresh();
  }

  /** Asks for a refresh soon, without piling refreshes up under a storm of redirections. */
  requestRefresh(): void {
    if (this.stopped || this.pendingTimer !== null || this.inflight !== null) return;
    const wait = Math.max(0, this.lastRefreshAt + MIN_REFRESH_GAP_MS - Date.now());
    this.pendingTimer = setTimeout(() => {
      this.pendingTimer = null;
      this.refresh().catch((err: Error) => log.warn({ err: err.message }, 'cluster topology refresh failed'));
    }, wait);
  }

  /** Loads the slot map now (single-flight). */
  refresh(): Promise<SlotMap> {
    if (this.inflight === null) {
      this.inflight = this.load().finally(() => {
        this.inflight = null;
        this.lastRefreshAt = Date.now();
      });
    }
    return this.inflight;
  }

  private async load(): Promise<SlotMap> {
    const candidates = [...new Set([...this.map.masters.map((m) => m.address), ...this.options.seeds])];
    const problems: string[] = [];
    for (const address of candidates) {
      try {
        const frame = await request(this.pool.connection(address, 0), ['CLUSTER', 'SLOTS'], this.options.queryTimeoutMs);
        const err = errorText(frame);
        if (err !== null) throw new Error(err);
        const map = SlotMap.fromClusterSlots(decodeReply(frame), splitAddress(address)[0]);
        if (map.masters.length === 0) throw new Error('CLUSTER SLOTS is empty (cluster not set up yet?)');
        this.install(map);
        return map;
      } catch (err) {
        problems.push(`${address}: ${(err as Error).message}`);
      }
    }
    throw new Error(`no node answered CLUSTER SLOTS (${problems.join('; ')})`);
  }

  private install(map: SlotMap): void {
    const before = this.map;
    this.map = map;
    const changed = before.masters.map((m) => m.address).join(',') !== map.masters.map((m) => m.address).join(',');
    if (changed) log.info({ masters: map.masters.map((m) => m.address), servedSlots: map.servedSlots }, 'cluster topology loaded');
    for (const l of this.changeListeners) l(map);
  }
}
