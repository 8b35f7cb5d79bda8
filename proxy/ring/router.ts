import { Placement } from '../../sharding/migration';
import { Router } from '../../sharding/router';
import { ClusterKeySpace } from '../../sharding/cluster-key-space';
import { CarryState } from './carry-state';

/**
 * A command blocked on a node, which a phase switch may move: a BLPOP blocked on ring A when the
 * ring switches to `done` would otherwise wait on a node no write reaches any more.
 */
export interface Rehomable {
  rehome(): void;
}

/**
 * Routes by ketama ring (sharding/ring.ts): a shard is a node's index on the ring (during a
 * migration, the pair of its indexes in both rings, see sharding/migration.ts). The placement is
 * an immutable snapshot, replaced whole by a phase switch or a config reload.
 */
export class RingRouter implements Router {
  private converging = 0;
  private drainWaiters: (() => void)[] = [];
  private readonly swapListeners: ((next: Placement) => void)[] = [];
  /** Blocking commands blocked now, asked to move when a swap changes where they belong. */
  private readonly blocked = new Set<Rehomable>();
  private held: { promise: Promise<void>; release: () => void } | null = null;
  /** Whether double-write's writes are answered after side A alone, and those in flight. */
  readonly carry = new CarryState();

  constructor(private current: Placement) {}

  /**
   * Counts a double-write in flight until `settled`. After a switch to `done`, writes wait for
   * these (drained()), so a late copy of this proxy's can never land on B after a B-only write.
   */
  track(settled: Promise<void>): void {
    this.converging++;
    void settled.then(() => {
      if (--this.converging > 0) return;
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const w of waiters) w();
    });
  }

  /**
   * Side A is closing for `done` (migration/closing.ts): writes dispatched from now on wait, to go
   * where the placement sends them once the hold ends (side B after this proxy's switch to done).
   */
  holdWrites(untilMs: number): void {
    // Already switched to done (a check that raced the switch): B takes the writes, nothing to hold.
    if (this.held !== null || !this.current.converges) return;
    let release: () => void = () => undefined;
    const promise = new Promise<void>((resolve) => (release = resolve));
    // At the latest when the closing would have expired, should nothing else end the hold.
    const timer = setTimeout(() => this.releaseWrites(), untilMs);
    timer.unref();
    this.held = { promise, release: () => (clearTimeout(timer), release()) };
  }

  releaseWrites(): void {
    const held = this.held;
    this.held = null;
    held?.release();
  }

  /** Null unless writes are held; then a promise that resolves when they may go. */
  get writesHeld(): Promise<void> | null {
    return this.held?.promise ?? null;
  }

  /** Null when no double-write is in flight, else a promise that resolves when none is. */
  drained(): Promise<void> | null {
    if (this.converging === 0) return null;
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** Registers a blocked command until the returned function is called. */
  holdBlocked(command: Rehomable): () => void {
    this.blocked.add(command);
    return () => this.blocked.delete(command);
  }

  get placement(): Placement {
    return this.current;
  }

  /** Takes effect for every request dispatched from now on; requests in flight finish where they went. */
  swap(next: Placement): void {
    // A new phase: writes converge until the fleet is known not to read from B (read-barrier.ts).
    if (next.phase !== this.current.phase) this.carry.converge();
    this.current = next;
    // Held writes go where the new placement sends them (side B, when it is done).
    if (!next.converges) this.releaseWrites();
    for (const b of [...this.blocked]) b.rehome();
    for (const l of this.swapListeners) l(next);
  }

  /** Called after every swap (the fleet record says the new phase at once). */
  onSwap(listener: (next: Placement) => void): void {
    this.swapListeners.push(listener);
  }

  /**
   * A node of a cluster side answered MOVED: that side's slot map learns it. With two clusters
   * (cluster to cluster), the side is the one `answeredBy` (or else `address`) is a master of;
   * when neither says, both maps are loaded again rather than one patched wrongly.
   */
  applyMoved(slot: number, address: string, answeredBy: string): void {
    const sides = this.clusterSides();
    if (sides.length === 1) return sides[0].owners.applyMoved(slot, address);
    const side = sides.find((c) => c.masters().includes(answeredBy)) ?? sides.find((c) => c.masters().includes(address));
    if (side !== undefined) side.owners.applyMoved(slot, address);
    else for (const c of sides) c.owners.requestRefresh();
  }

  /** TRYAGAIN, CLUSTERDOWN or a lost node: the cluster sides' slot maps are loaded again soon. */
  requestRefresh(): void {
    for (const c of this.clusterSides()) c.owners.requestRefresh();
  }

  private clusterSides(): ClusterKeySpace[] {
    const { from, to } = this.current;
    return [from, to].filter((s): s is ClusterKeySpace => s instanceof ClusterKeySpace);
  }

  shardOf(key: Buffer): number {
    return this.current.shardOf(key);
  }

  nodeOf(shard: number): string | null {
    return this.current.readAddress(shard);
  }

  masters(): readonly string[] {
    return this.current.readMasters();
  }
}
