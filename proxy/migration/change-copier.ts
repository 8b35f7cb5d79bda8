/**
 * While writes converge (double-write, read-new), every key that changes on side A reaches side B,
 * whoever changed it: a script or function writing keys it never declared, a client of another
 * proxy or one connected straight to an A node, MULTI, expiry, eviction, a module command. A
 * client's write of keys the proxy can name is already copied with it (converging-write.ts); this
 * catches the rest.
 *
 * One change feed per node of side A (backend/change-feed.ts: CLIENT TRACKING BCAST, so the node
 * names every key that changes on it). Each named key whose owner differs between the sides is
 * copied with the versioned SNAPSHOT/APPLY of converge.ts, the snapshot taken "only if changed":
 * a key still in the state an earlier snapshot carried (a converging write of any proxy, reported
 * again by the feed) costs one script on A and nothing on B.
 *
 * With several proxies, every one keeps the feeds (it hears the fleet's barriers on them, and its
 * own gaps), but only the proxy holding a node's copier lease (copier-lease.ts) copies what that
 * node's feed names: one carry per change, not one per proxy. A barrier of another proxy asks the
 * holder (carried-mark.ts); the others stand by (standby.ts), and one taking the node over copies
 * what it stood by for, or re-walks the node.
 *
 * Per node of side A:
 *   feed --keys--> pending (deduplicated) --drain, one batch at a time--> SNAPSHOT on A, APPLY on B
 *   `heard` counts pushes; `copiedThrough`: every push up to that number has been copied (or has
 *   failed, and is retried). A barrier (a PING on the feed: the node sends it after every push
 *   caused before) waits until copiedThrough reaches the pushes heard before its PONG: a script's
 *   reply waits on it, so its writes are on B before the client sees it (read-your-writes in
 *   read-new, and exactness at `done`).
 *
 * A gap is never silent. A feed lost, a flush (the feed then names no keys), a master of a cluster
 * side A that appeared mid-migration (a failover), or a key whose copy keeps failing: changes may
 * have gone unseen. The node is then re-walked as soon as its feed is up again (SCAN of the node,
 * and of side B for keys that belong to it, each copied "only if changed", B's forcibly), and
 * until that is done the node is not covered: switching to read-new or done is refused, and
 * `PROXY MIGRATION STATUS`, INFO and the fleet record say which node and why.
 */
import { MigrationChanges, ProxyContext } from '../context';
import { ChangeFeed } from '../backend/change-feed';
import { RingRouter } from '../ring/router';
import { log } from '../telemetry/log';
import { MigrationFeedCounts } from '../telemetry/metrics';
import { ownerOfKey } from '../../sharding/key-space';
import { BOOKKEEPING_PREFIX, isBookkeepingKey } from './converge';
import { CopyTarget } from './copy-keys';
import { ChangeCounts, NodeChanges } from './node-changes';
import { ClosingWatch, closingPlace } from './closing';
import { ReadBarrierWatch, readingPlace } from './read-barrier';
import { fleetOf } from './admin';
import { CopierLeases, LeaseView, copiersKeyOf } from './copier-lease';
import { barrierTimeoutWhy, copierHolders, feedInfoLines, feedSummary, noHolderGaveUp, uncoveredLines, withFollows } from './copier-report';
import { CarriedMarks } from './carried-mark';
import { FeedKeyCopy, scanNode } from './feed-copy';
import { handOver, prune, remember } from './standby';
import { HandOn, NodeFollowers } from './followers';
import { Successors } from './successors';
import { timeBound } from './time-bound';

/** How often feeds are checked against side A's masters (a failover, a lost feed). */
const SYNC_EVERY_MS = 1000;
const RETRY_FAILED_MS = 500;
/** A lost feed is opened again this soon (then at every sync while its node is down). */
const REOPEN_AFTER_MS = 100;
/** How long a barrier waits for a feed that is down before the reply goes anyway (the gap is counted). */
const BARRIER_WAIT_MS = 5000;

export class ChangeCopier implements MigrationChanges {
  private readonly nodes = new Map<string, NodeChanges>();
  private timer: NodeJS.Timeout | null = null;
  /** The migration's first feeds are open: a master that appears later starts with a gap. */
  private started = false;
  private stopped = false;
  private readonly count: ChangeCounts = { copied: 0, unchanged: 0, copyFailures: 0, gaps: 0, rewalks: 0, missedAfterFence: 0, barrierTimeouts: 0 };

  /** Side A closing for done (closing.ts): this proxy holds its writes. */
  private readonly closing: ClosingWatch;
  /** Before any proxy reads from side B (read-barrier.ts). */
  private readonly reading: ReadBarrierWatch;
  /** Nodes of side B a connection to was lost and none is up again: writes moving there converge, so their clients hear of it. */
  private readonly bDown = new Set<string>();
  /** One copier per node of A for the fleet (copier-lease.ts), and barriers through another holder (carried-mark.ts). */
  private readonly leases: CopierLeases;
  private readonly marks: CarriedMarks;
  private readonly keyCopy: FeedKeyCopy;
  /** migration.carry: replication: the nodes this proxy copies are followed as replicas instead (follow.ts). */
  private readonly followers: NodeFollowers;
  private readonly successors = new Successors();

  constructor(
    private readonly ctx: ProxyContext,
    private readonly ring: RingRouter,
    /** This proxy's id in the fleet (migration/registration.ts), which acknowledges a closing. */
    readonly selfId: () => string = () => '',
    /** The id its copier leases go by: the fleet id it registers under later. */
    readonly leaseId: string = selfId() || `slotproxy-${process.pid}`,
  ) {
    this.reading = new ReadBarrierWatch(ctx, ring, this, (placement) => fleetOf(ctx, placement));
    this.closing = new ClosingWatch(ctx, ring, { settle: () => this.settle(), selfId: () => this.selfId() });
    this.keyCopy = new FeedKeyCopy(ctx, ring, this.count, (node, t, err) => this.failed(node, t, err));
    this.followers = new NodeFollowers(ctx, () => ring.placement, () => this.leases.checkStall(), { isNode: (a) => this.nodes.has(a), after: (a) => this.after(a), successor: (a) => this.successors.of(a) });
    this.leases = new CopierLeases(
      ctx,
      () => ring.placement,
      leaseId,
      {
        nodes: () => [...this.nodes.values()].map((n) => ({ address: n.address, mine: n.mine, state: n.state })),
        seen: (address, view) => this.leaseSeen(address, view),
        failed: (reason) => log.warn({ reason }, 'migration: cannot read the fleet to know who copies each node\'s changes; tried again'),
        ticked: () => {
          this.marks.heard();
          for (const node of this.nodes.values()) void prune(node, () => this.marks.confirmed(node.address, BARRIER_WAIT_MS));
        },
      },
      (placement) => fleetOf(ctx, placement),
    );
    this.marks = new CarriedMarks(ctx, () => ring.placement, {
      holds: (address) => this.nodes.get(address)?.mine === true,
      ownBarrier: (address) => {
        const node = this.nodes.get(address);
        return node === undefined ? Promise.resolve(`${address} is no longer a node of side A`) : this.feedBarrier(node);
      },
      addresses: () => [...this.nodes.keys()],
    });
    ctx.pool.onConnectionLost((address) => {
      if (this.ring.placement.to?.masters().includes(address) === true) this.bDown.add(address);
    });
    ctx.pool.onConnectionReady((address) => this.bDown.delete(address));
    ring.onSwap(() => this.sync());
    this.sync();
  }

  /** Resolves once every feed is up (or after `timeoutMs`): the proxy serves a migration only then. */
  async ready(timeoutMs: number): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until && [...this.nodes.values()].some((n) => n.feed === null || !n.feed.ready || n.holder === null)) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  /** A clean shutdown: what the feeds of the nodes it copies heard is copied (within `timeoutMs`). */
  async release(timeoutMs: number): Promise<void> {
    this.leases.stop();
    const held = this.held();
    if (held.length === 0) return;
    await Promise.race([Promise.all(held.map((a) => this.after(a))), new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())]);
  }

  /** Called when this proxy takes or gives up a node's copier (its registration names them at once). */
  onHeldChange: () => void = () => undefined;

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.leases.stop();
    this.marks.clear();
    this.followers.stopAll();
    for (const node of this.nodes.values()) this.drop(node);
    this.nodes.clear();
  }

  /** False while side B's node `address` is known to be unreachable (the feeds could not carry a write there now). */
  reachesSideB(address: string): boolean {
    return !this.bDown.has(address);
  }

  /** Why switching to read-new or done must wait: one line per node of side A that is not covered. */
  uncovered(): string[] {
    return [...uncoveredLines(this.nodes.values()), ...this.followers.uncovered()];
  }

  /** For the fleet record: `live` when every node is covered, else the nodes that are not; `-` without feeds. */
  summary(): string {
    const feeds = feedSummary([...this.nodes.values()]);
    return this.ring.carry.replication ? withFollows(feeds, this.followers.openStates()) : feeds;
  }

  /** On the replication carry, while no follow, here or at a node's holder, failed or stopped. */
  catchingUp(): boolean {
    return this.ring.carry.replication && this.followers.catchingUp() && noHolderGaveUp(this.nodes.values());
  }

  /** `address=state` for every node of side A with a feed. */
  states(): string[] {
    return [...this.nodes.values()].map((n) => `${n.address}=${n.reported}`);
  }

  /** `address=proxy id` of each node's copier holder (`?` while unknown). */
  copiers(): string[] {
    return copierHolders([...this.nodes.values()]);
  }

  /** The nodes of side A whose copier this proxy holds. */
  held(): string[] {
    this.leases.checkStall();
    return [...this.nodes.values()].filter((n) => n.mine).map((n) => n.address);
  }

  counts(): MigrationFeedCounts {
    return { feeds: this.nodes.size, uncovered: this.uncovered().length, ...this.count, follows: this.followers.counts() };
  }

  /** INFO proxy's lines (copier-report.ts). */
  infoLines(): string[] {
    // How A's changes reach B (carry-choice.ts), while a migration is under way.
    const carry = this.ring.placement.to === null ? [] : [`migration_carry:${this.ring.carry.replication ? 'replication' : 'feeds'}`, `migration_carry_why:${this.ring.carry.why}`];
    return [...carry, ...feedInfoLines(this.count, this.nodes.size, this.uncovered().length, this.held().length, this.copiers(), this.ring.carry.answerAfterA), ...this.followers.infoLines()];
  }

  /**
   * A barrier: resolves once every change made on `address` before now has reached side B (null),
   * or with why it could not be confirmed. Null at once when nothing needs to wait. Checked on the
   * node's own feed while this proxy holds its copier, else asked of the holder (carried-mark.ts).
   */
  after(address: string): Promise<string | null> | null {
    const node = this.nodes.get(address);
    if (node === undefined) return null;
    return node.mine ? this.feedBarrier(node) : this.bounded(node, (finish) => void this.marks.wait(address).then(() => finish(null)));
  }

  /** The barrier on this proxy's own feed of `node` and its copier. */
  private feedBarrier(node: NodeChanges): Promise<string | null> {
    if (this.ring.carry.replication) {
      // Handed on across a failover (followers.ts): the new node's barrier has a bound of its own.
      const own = this.bounded<HandOn>(node, (finish) => void this.followers.barrier(node.address).then(finish));
      return own.then((r) => (r !== null && typeof r === 'object' ? this.followers.handedOn(r.handOn) : r));
    }
    return this.bounded(node, (finish) => this.feedWait(node, finish));
  }

  private feedWait(node: NodeChanges, finish: (problem: string | null) => void): void {
    // Given up meanwhile (copier-lease.ts): the new holder confirms it.
    if (!node.mine) return void this.marks.wait(node.address).then(() => finish(null));
    const feed = node.feed;
    if (feed === null || !feed.ready) {
      node.coverWaiters.push(() => finish(null));
      return;
    }
    // Taken over from another proxy: changes its feed heard before are carried by the re-walk alone.
    if (node.gapSince !== null && node.takenOver) {
      node.coverWaiters.push(() => this.feedWait(node, finish));
      return;
    }
    feed.fence(() => {
      // Lost meanwhile: the re-walk that covers the gap carries this write too.
      if (node.feed !== feed || !feed.ready) return node.coverWaiters.push(() => finish(null));
      node.whenCopied(node.heard, () => finish(node.failed.size > 0 ? node.lastFailure : null));
    });
  }

  /** `wait` given BARRIER_WAIT_MS to call its `finish` with null; after that, why not. */
  private bounded<T = never>(node: NodeChanges, wait: (finish: (problem: string | null | T) => void) => void): Promise<string | null | T> {
    return timeBound<string | null | T>(BARRIER_WAIT_MS, wait, () => {
      this.count.barrierTimeouts++;
      const why = barrierTimeoutWhy(node, this.ring.carry.replication && node.mine ? this.followers.stateOf(node.address) : null, BARRIER_WAIT_MS);
      log.warn({ node: node.address, why }, 'migration: a write\'s changes were not confirmed on side B in time; they are copied when the node is re-walked or the copy succeeds');
      return why;
    });
  }

  /** Every node of side A may have had changes no feed heard (start-gap.ts): each is re-walked. */
  gapEverywhere(reason: string): void {
    // A node in a gap already (its copier just taken), or re-walked since its feed came up, is or
    // will be walked after this proxy started: that covers this too.
    for (const node of this.nodes.values()) if (node.gapSince === null && !node.walked) this.openGap(node, reason);
  }

  /** Every change heard so far on every node is on side B (before `done` fences B); what could not be confirmed. */
  async settle(): Promise<string[]> {
    const problems = await Promise.all([...this.nodes.keys()].map((a) => this.after(a)));
    return problems.filter((p): p is string => p !== null);
  }

  private sync(): void {
    if (this.stopped) return;
    const placement = this.ring.placement;
    this.successors.seen(placement.from);
    const wanted = new Set(placement.converges ? placement.from.masters() : []);
    for (const [address, node] of this.nodes) {
      if (wanted.has(address)) continue;
      this.followers.stop(address);
      this.drop(node);
      this.nodes.delete(address);
    }
    for (const address of wanted) {
      let node = this.nodes.get(address);
      if (node === undefined) {
        node = new NodeChanges(address);
        this.nodes.set(address, node);
        // A master that appeared mid-migration (a failover of side A) took writes before its feed was up.
        if (this.started) this.openGap(node, 'a new master of side A');
      }
      if (node.feed === null || node.feed.isClosed) this.openFeed(node);
    }
    this.started = wanted.size > 0;
    if (wanted.size > 0) {
      this.timer ??= setInterval(() => (this.sync(), void this.reading.check()), SYNC_EVERY_MS).unref();
      this.leases.start();
    } else {
      if (this.timer !== null) clearInterval(this.timer);
      this.timer = null;
      this.leases.stop();
    }
  }

  private openFeed(node: NodeChanges): void {
    const feed: ChangeFeed = new ChangeFeed(node.address, this.ctx.pool, {
      ready: () => {
        if (node.gapSince !== null && node.mine) void this.rewalk(node);
      },
      lost: (_feed, reason) => {
        if (node.feed !== feed) return;
        node.feed = null;
        this.openGap(node, `change feed lost (${reason})`);
        setTimeout(() => this.sync(), REOPEN_AFTER_MS).unref();
      },
      changed: (keys) => {
        if (node.feed === feed) this.heard(node, keys);
      },
    }, this.ring.carry.replication ? BOOKKEEPING_PREFIX : null);
    node.feed = feed;
  }

  private drop(node: NodeChanges): void {
    const feed = node.feed;
    node.feed = null;
    feed?.close();
    node.pending.clear();
    node.failed.clear();
    node.standby.clear();
    for (const w of node.copyWaiters.splice(0)) w.done();
    for (const w of node.coverWaiters.splice(0)) w();
  }

  private heard(node: NodeChanges, keys: Buffer[] | null): void {
    this.leases.checkStall();
    node.heard++;
    // A flush of the coordination node erased the fleet's hashes there, unnamed: a closing held for is gone, marks waited on count again.
    if (keys === null && closingPlace(this.ring.placement)?.address === node.address) (this.closing.heard(), this.marks.heard());
    if (this.ring.carry.replication) {
      // The node's replication stream carries every change (a flush too): the feed tells the fleet's barriers, and the copy tool's marks (followers.ts).
      for (const key of keys ?? []) if (isBookkeepingKey(key)) (this.followers.heard(node.address, key), this.heardBookkeeping(node, key));
      node.copied(node.heard);
      return;
    }
    if (keys === null) {
      // FLUSHALL/FLUSHDB: the keys are gone from A and the feed names none of them.
      this.openGap(node, 'the node was flushed');
    } else if (node.mine || node.holder === null) {
      // Until the first tick answers, kept for whoever this proxy turns out to be.
      for (const key of keys) {
        if (isBookkeepingKey(key)) this.heardBookkeeping(node, key);
        else node.pending.set(key.toString('latin1'), { key, force: false });
      }
    } else {
      for (const key of keys) if (isBookkeepingKey(key)) this.heardBookkeeping(node, key);
      remember(node, keys); // another proxy copies: this one stands by (standby.ts)
    }
    if (!node.draining && node.mine) void this.drain(node);
  }

  /** The fleet's own hashes on this node: a closing, a read barrier, a copier's mark. */
  private heardBookkeeping(node: NodeChanges, key: Buffer): void {
    const placement = this.ring.placement;
    const closing = closingPlace(placement);
    if (closing === null || closing.address !== node.address) return;
    const name = key.toString('latin1');
    if (name === closing.key) this.closing.heard();
    else if (name === readingPlace(placement)?.key) this.reading.heard();
    else if (name === copiersKeyOf(placement)?.key) this.marks.heard();
  }

  /**
   * What a tick found for a node (copier-lease.ts). Taking it over from another proxy re-walks the
   * node (what changed since that proxy last copied was heard by no copier); giving it up drops
   * what was heard and not copied (the proxy that took it re-walked, or the history copy carries it).
   */
  private leaseSeen(address: string, view: LeaseView): void {
    const node = this.nodes.get(address);
    if (node === undefined) return;
    const wasMine = node.mine;
    const first = node.holder === null;
    node.holder = view.holder;
    node.holderState = view.state;
    node.leaseSeenAt = Date.now();
    node.mine = view.kind !== 'other';
    if (this.ring.carry.replication) this.followers.hold(address, node.mine);
    if (view.kind === 'acquired') {
      // The keys heard since the last copier confirmed are copied now; a re-walk only if they may not be all.
      const standby = node.standby.size;
      const covered = handOver(node, view.takeover !== '');
      log.info({ node: address, takeover: view.takeover || null, standby, rewalk: view.takeover !== '' && !covered }, 'migration: this proxy copies the node\'s changes now');
      this.onHeldChange();
      // What was heard before is someone else's to have copied (or in pending, kept at start).
      if (node.pending.size === 0 && !node.draining) node.copied(node.heard);
      if (view.takeover !== '' && !covered) {
        node.takenOver = true;
        this.openGap(node, view.takeover);
      } else if (node.gapSince !== null && node.feed?.ready === true) void this.rewalk(node);
    }
    if (node.mine && !node.draining && node.pending.size > 0) void this.drain(node);
    if (!node.mine && (wasMine || first)) {
      if (wasMine) {
        log.info({ node: address, holder: view.holder }, 'migration: another proxy copies the node\'s changes now');
        this.onHeldChange();
      }
      for (const p of node.pending.values()) node.standby.set(p.key.toString('latin1'), { key: p.key, seq: node.heard });
      for (const [id, key] of node.failed) node.standby.set(id, { key, seq: node.heard });
      node.pending.clear();
      node.failed.clear();
      // Barriers waiting on this proxy's copier now wait for the new holder.
      for (const w of node.copyWaiters.splice(0)) void this.marks.wait(address).then(w.done);
      for (const w of node.coverWaiters.splice(0)) void this.marks.wait(address).then(w);
    }
  }

  private async drain(node: NodeChanges): Promise<void> {
    node.draining = true;
    try {
      // Before each batch: a stall gives the node up, its pending keys going to standby (copier-lease.ts).
      while ((this.leases.checkStall(), node.pending.size > 0)) {
        const through = node.heard;
        const batch = [...node.pending.values()];
        node.pending.clear();
        // While writes are answered after A, what the feed names has nearly always changed: no fingerprint check.
        await this.keyCopy.copy(node, batch, { ifChanged: !this.ring.carry.answerAfterA, fromFeed: true });
        node.copied(node.pending.size === 0 ? node.heard : through);
      }
      node.copied(node.heard);
    } finally {
      node.draining = false;
    }
  }

  private failed(node: NodeChanges, t: CopyTarget, err: unknown): void {
    this.count.copyFailures++;
    node.failed.set(t.key.toString('latin1'), t.key);
    node.lastFailure = `${t.from} -> ${t.to}: ${err instanceof Error ? err.message : String(err)}`;
    this.retryFailed(node);
  }

  private retryFailed(node: NodeChanges): void {
    setTimeout(() => {
      this.leases.checkStall(); // set before a stall, it may run first after it
      if (this.nodes.get(node.address) !== node || node.failed.size === 0 || !node.mine) return;
      for (const [id, key] of node.failed) node.pending.set(id, { key, force: true });
      if (!node.draining) void this.drain(node);
    }, RETRY_FAILED_MS).unref();
  }

  private openGap(node: NodeChanges, reason: string): void {
    // Under the replication carry a lost feed or a flush loses no change: the stream has them.
    if (this.ring.carry.replication) return;
    node.gapEpoch++;
    node.gapSince ??= Date.now();
    node.gapReason = reason;
    this.count.gaps++;
    node.standbyOk = false;
    if (!node.mine) return;
    log.warn({ node: node.address, reason }, 'migration: changes on this node may have gone unseen; it is re-walked once its change feed is up');
    if (node.feed?.ready === true) void this.rewalk(node);
  }

  /**
   * Covers a gap: every key of the node that moves, and every key of side B that belongs to it,
   * copied again. Keys changed meanwhile are also named by the feed (up before the walk began).
   */
  private async rewalk(node: NodeChanges): Promise<void> {
    this.leases.checkStall();
    if (node.rewalking || this.stopped || !node.mine) return;
    node.rewalking = true;
    const epoch = node.gapEpoch;
    this.count.rewalks++;
    try {
      const placement = this.ring.placement;
      const to = placement.to;
      const ownKey = (k: Buffer): boolean => !isBookkeepingKey(k) && ownerOfKey(placement.from, k) === node.address;
      await scanNode(this.ctx, node.address, async (keys) => this.keyCopy.copy(node, keys.filter(ownKey).map((key) => ({ key, force: false }))));
      for (const b of to?.masters() ?? []) {
        await scanNode(this.ctx, b, async (keys) => this.keyCopy.copy(node, keys.filter(ownKey).map((key) => ({ key, force: true }))));
      }
      if (node.gapEpoch === epoch && node.failed.size === 0 && node.feed?.ready === true && this.nodes.get(node.address) === node) {
        node.gapSince = null;
        node.takenOver = false;
        node.walked = true;
        log.info({ node: node.address }, 'migration: node re-walked, its changes are covered again');
        for (const w of node.coverWaiters.splice(0)) w();
      } else this.rewalkLater(node);
    } catch (err) {
      log.warn({ node: node.address, err: err instanceof Error ? err.message : String(err) }, 'migration: re-walk failed; tried again');
      this.rewalkLater(node);
    } finally {
      node.rewalking = false;
    }
  }

  private rewalkLater(node: NodeChanges): void {
    setTimeout(() => {
      if (this.nodes.get(node.address) === node && node.gapSince !== null && node.feed?.ready === true && node.mine) void this.rewalk(node);
    }, RETRY_FAILED_MS).unref();
  }
}
