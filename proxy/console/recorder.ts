/**
 * The console's memory: one sample of the counters per second (requests, latency, errors, per node)
 * and a short list of events (reloads, phase switches, failovers, nodes lost, feed gaps), both in
 * fixed-size rings. Nothing here runs per request: a 1 s timer reads the counters the hot path
 * already increments, and the events come from listeners that fire on changes (ring swaps, slot map
 * reloads, connections lost or made, reloads).
 */
import { ProxyContext } from '../context';
import { Placement } from '../../sharding/migration';
import { Ring } from '../../sharding/ring';
import { SlotMap } from '../cluster/slot-map';
import { LATENCY_BUCKETS_SECONDS } from '../telemetry/latency-histogram';

/** Five minutes of samples, and the last events. */
export const SAMPLES_KEPT = 300;
export const EVENTS_KEPT = 100;
const SAMPLE_MS = 1000;

export type EventKind = 'start' | 'reload' | 'phase' | 'failover' | 'topology' | 'node-down' | 'node-up' | 'feed-gap' | 'rewalk';

export interface ConsoleEvent {
  /** Milliseconds since the epoch. */
  at: number;
  kind: EventKind;
  text: string;
}

/** One second of the proxy's life: rates over the second before `at`. */
export interface Sample {
  at: number;
  requests: number;
  errors: number;
  /** Mean latency of commands sent to a node in that second (ms), null when none was. */
  latencyMs: number | null;
  /** Upper bound of the latency bucket holding the 99th percentile (ms), null when no command. */
  p99Ms: number | null;
  clients: number;
}

/** One node's rates, from its last two samples. */
export interface NodeRates {
  requests: number;
  errors: number;
}

/** A fixed-size ring: push overwrites the oldest. */
class Recent<T> {
  private readonly items: T[] = [];
  private next = 0;
  constructor(private readonly size: number) {}

  push(item: T): void {
    if (this.items.length < this.size) this.items.push(item);
    else this.items[this.next] = item;
    this.next = (this.next + 1) % this.size;
  }

  /** Oldest first. */
  toArray(): T[] {
    return this.items.length < this.size ? [...this.items] : [...this.items.slice(this.next), ...this.items.slice(0, this.next)];
  }

  last(): T | undefined {
    return this.items.length === 0 ? undefined : this.items[(this.next + this.size - 1) % this.size];
  }
}

interface Totals {
  at: number;
  commands: number;
  errors: number;
  latencyCount: number;
  latencySumMs: number;
  buckets: Float64Array;
  nodes: Map<string, { requests: number; errors: number }>;
}

/** Latency bucket bounds in ms, as the histogram has them (the last bucket is above every bound). */
const BOUNDS_MS = LATENCY_BUCKETS_SECONDS.map((s) => s * 1000);

export class ConsoleRecorder {
  private readonly samples = new Recent<Sample>(SAMPLES_KEPT);
  private readonly eventRing = new Recent<ConsoleEvent>(EVENTS_KEPT);
  private readonly nodeRates = new Map<string, NodeRates>();
  private readonly nodeDown = new Set<string>();
  /** Sentinel master name -> when its address last changed. */
  private readonly failovers = new Map<string, number>();
  private previous: Totals;
  private feedGaps = 0;
  private feedRewalks = 0;
  private timer: NodeJS.Timeout | null = null;
  lastReload: number | null = null;

  /** `sentinelNames[i]`: the Sentinel master name of ring A's node i, when it has one. */
  constructor(private readonly ctx: ProxyContext, private readonly sentinelNames: readonly (string | undefined)[] = []) {
    this.previous = this.totals();
    this.event('start', `slotproxy started in ${ctx.mode} mode`);
    let placement = ctx.ring?.placement ?? null;
    ctx.ring?.onSwap((next) => {
      if (placement !== null) this.placementChanged(placement, next);
      placement = next;
    });
    let masters = ctx.topology?.current.masters.map((m) => m.address) ?? [];
    ctx.topology?.onChange((map: SlotMap) => {
      const now = map.masters.map((m) => m.address);
      if (now.join(',') !== masters.join(',') && masters.length > 0) this.event('topology', `cluster masters now ${now.join(', ')} (were ${masters.join(', ')})`);
      masters = now;
    });
    ctx.pool.onConnectionLost((addr, reason) => {
      if (this.nodeDown.has(addr)) return;
      this.nodeDown.add(addr);
      this.event('node-down', `lost the connection to ${addr}: ${reason}`);
    });
    ctx.pool.onConnectionReady((addr) => {
      if (!this.nodeDown.delete(addr)) return;
      this.event('node-up', `connected to ${addr} again`);
    });
  }

  start(): void {
    this.timer = setInterval(() => this.sample(), SAMPLE_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  reloaded(): void {
    this.lastReload = Date.now();
    this.event('reload', 'configuration reloaded (SIGHUP)');
  }

  event(kind: EventKind, text: string): void {
    this.eventRing.push({ at: Date.now(), kind, text });
  }

  events(): ConsoleEvent[] {
    return this.eventRing.toArray();
  }

  series(): Sample[] {
    return this.samples.toArray();
  }

  latest(): Sample | undefined {
    return this.samples.last();
  }

  ratesOf(addr: string): NodeRates | undefined {
    return this.nodeRates.get(addr);
  }

  /** True after a connection to `addr` was lost and none was made since. */
  lostConnection(addr: string): boolean {
    return this.nodeDown.has(addr);
  }

  lastFailover(name: string): number | null {
    return this.failovers.get(name) ?? null;
  }

  /** Takes one sample now (the timer's work; tests call it to avoid waiting). */
  sample(): void {
    const now = this.totals();
    const prev = this.previous;
    const seconds = Math.max((now.at - prev.at) / 1000, 0.001);
    const count = now.latencyCount - prev.latencyCount;
    this.samples.push({
      at: now.at,
      requests: (now.commands - prev.commands) / seconds,
      errors: (now.errors - prev.errors) / seconds,
      latencyMs: count > 0 ? (now.latencySumMs - prev.latencySumMs) / count : null,
      p99Ms: count > 0 ? percentileMs(prev.buckets, now.buckets, count, 0.99) : null,
      clients: this.ctx.stats.connectedClients,
    });
    for (const [addr, n] of now.nodes) {
      const p = prev.nodes.get(addr) ?? n;
      this.nodeRates.set(addr, { requests: (n.requests - p.requests) / seconds, errors: (n.errors - p.errors) / seconds });
    }
    this.previous = now;
    const counts = this.ctx.changes?.counts();
    if (counts !== undefined) {
      if (counts.gaps > this.feedGaps) this.event('feed-gap', `${counts.gaps - this.feedGaps} change feed gap(s): a node of side A may have had changes no feed saw (uncovered: ${this.ctx.changes?.uncovered().join('; ') || 'none now'})`);
      if (counts.rewalks > this.feedRewalks) this.event('rewalk', `${counts.rewalks - this.feedRewalks} re-walk(s) covered a gap`);
      this.feedGaps = counts.gaps;
      this.feedRewalks = counts.rewalks;
    }
  }

  private totals(): Totals {
    const s = this.ctx.stats;
    const nodes = new Map<string, { requests: number; errors: number }>();
    for (const addr of knownNodes(this.ctx)) {
      const c = this.ctx.pool.countersOf(addr);
      nodes.set(addr, { requests: c.requests, errors: c.eof + c.err + c.timedOut });
    }
    return {
      at: Date.now(),
      commands: s.commands,
      errors: s.protocolErrors + s.crossSlotErrors + s.backendErrors + s.replyErrors,
      latencyCount: s.latency.count,
      latencySumMs: s.latency.sumMs,
      buckets: Float64Array.from(s.latency.counts),
      nodes,
    };
  }

  private placementChanged(before: Placement, after: Placement): void {
    if (before.phase !== after.phase) this.event('phase', `migration phase ${before.phase ?? 'none'} -> ${after.phase ?? 'none'}`);
    if (before.from instanceof Ring && after.from instanceof Ring) {
      after.from.nodes.forEach((n, i) => {
        const was = (before.from as Ring).nodes[i]?.addr;
        if (was === undefined || was === n.addr) return;
        const name = this.sentinelNames[i];
        if (name !== undefined) this.failovers.set(name, Date.now());
        this.event('failover', `${name ?? n.name} moved from ${was} to ${n.addr}`);
      });
    }
  }
}

/** Every node the proxy knows: both sides' masters, and a cluster's replicas. */
export function knownNodes(ctx: ProxyContext): string[] {
  const out = new Set<string>();
  const p = ctx.ring?.placement;
  if (p !== undefined) {
    for (const a of p.from.masters()) out.add(a);
    for (const a of p.to?.masters() ?? []) out.add(a);
  }
  for (const m of ctx.topology?.current.masters ?? []) {
    out.add(m.address);
    for (const r of m.replicas) out.add(r);
  }
  return [...out];
}

/** The upper bound (ms) of the bucket holding quantile `q` of the observations between two readings. */
function percentileMs(before: Float64Array, after: Float64Array, count: number, q: number): number {
  let acc = 0;
  for (let i = 0; i < after.length; i++) {
    acc += after[i] - before[i];
    if (acc >= q * count) return i < BOUNDS_MS.length ? BOUNDS_MS[i] : BOUNDS_MS[BOUNDS_MS.length - 1];
  }
  return BOUNDS_MS[BOUNDS_MS.length - 1];
}
