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
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';
import { RingRouter } from '../ring/router';
import { log } from '../telemetry/log';
import { MigrationFeedCounts } from '../telemetry/metrics';
import { SlotOwners, ownerOfKey } from '../../sharding/key-space';
import { Snapshot, applyCommand, isBookkeepingKey, parseApply, parseSnapshot, parseSnapshotsIfChanged, snapshotChangedCommand, snapshotCommand } from './converge';
import { CopyTarget, movingTargets } from './copy-keys';
import { ChangeCounts, NodeChanges, Pending, groupByBookkeeping } from './node-changes';
import { migrationScript } from './side-request';
import { applyBurst } from './apply-burst';
import { ACK_SCRIPT, CLOSING_TTL_MS, closingCall, closingPlace } from './closing';
import { ReadBarrierWatch, readingPlace } from './read-barrier';
import { fleetOf } from './admin';

/** How often feeds are checked against side A's masters (a failover, a lost feed). */
const SYNC_EVERY_MS = 1000;
const RETRY_FAILED_MS = 500;
/** A lost feed is opened again this soon (then at every sync while its node is down). */
const REOPEN_AFTER_MS = 100;
const SCAN_COUNT = '500';
/** How long a barrier waits for a feed that is down before the reply goes anyway (the gap is counted). */
const BARRIER_WAIT_MS = 5000;
/** The shared lane the copier's own requests use. */
const LANE = 0;

export class ChangeCopier implements MigrationChanges {
  private readonly nodes = new Map<string, NodeChanges>();
  private timer: NodeJS.Timeout | null = null;
  /** The migration's first feeds are open: a master that appears later starts with a gap. */
  private started = false;
  private stopped = false;
  private readonly count: ChangeCounts = { copied: 0, unchanged: 0, copyFailures: 0, gaps: 0, rewalks: 0, missedAfterFence: 0, barrierTimeouts: 0 };

  /** Side A is closing for done (closing.ts): this proxy holds its writes; one check at a time. */
  private holding = false;
  private closingCheck: Promise<void> = Promise.resolve();
  /** Before any proxy reads from side B (read-barrier.ts). */
  private readonly reading: ReadBarrierWatch;
  /** Nodes of side B a connection to was lost and none is up again: writes moving there converge, so their clients hear of it. */
  private readonly bDown = new Set<string>();

  constructor(
    private readonly ctx: ProxyContext,
    private readonly ring: RingRouter,
    /** This proxy's id in the fleet (migration/registration.ts), which acknowledges a closing. */
    readonly selfId: () => string = () => '',
  ) {
    this.reading = new ReadBarrierWatch(ctx, ring, this, (placement) => fleetOf(ctx, placement));
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
    while (Date.now() < until && [...this.nodes.values()].some((n) => n.feed === null || !n.feed.ready)) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    for (const node of this.nodes.values()) this.drop(node);
    this.nodes.clear();
  }

  /** False while side B's node `address` is known to be unreachable (the feeds could not carry a write there now). */
  reachesSideB(address: string): boolean {
    return !this.bDown.has(address);
  }

  /** Why switching to read-new or done must wait: one line per node of side A that is not covered. */
  uncovered(): string[] {
    const out: string[] = [];
    for (const n of this.nodes.values()) {
      if (n.covered) continue;
      const why = n.state === 'behind' ? `${n.failed.size} keys not copied yet (${n.lastFailure})` : n.gapSince === null ? 'its change feed is starting' : `${n.gapReason} ${Math.round((Date.now() - n.gapSince) / 1000)} s ago`;
      out.push(`${n.address} ${n.state}: ${why}`);
    }
    return out;
  }

  /** For the fleet record: `live` when every node is covered, else the nodes that are not; `-` without feeds. */
  summary(): string {
    if (this.nodes.size === 0) return '-';
    const open = [...this.nodes.values()].filter((n) => !n.covered).map((n) => `${n.address}=${n.state}`);
    return open.length === 0 ? 'live' : open.join(',');
  }

  /** `address=state` for every node of side A with a feed. */
  states(): string[] {
    return [...this.nodes.values()].map((n) => `${n.address}=${n.state}`);
  }

  counts(): MigrationFeedCounts {
    return { feeds: this.nodes.size, uncovered: this.uncovered().length, ...this.count };
  }

  /** INFO proxy's lines. */
  infoLines(): string[] {
    const c = this.count;
    return [
      `migration_feeds:${this.nodes.size}`,
      `migration_feeds_uncovered:${this.uncovered().length}`,
      `migration_feed_keys_copied:${c.copied}`,
      `migration_feed_keys_unchanged:${c.unchanged}`,
      `migration_feed_copy_failures:${c.copyFailures}`,
      `migration_feed_gaps:${c.gaps}`,
      `migration_feed_rewalks:${c.rewalks}`,
      `migration_feed_missed_after_fence:${c.missedAfterFence}`,
      `migration_feed_barrier_timeouts:${c.barrierTimeouts}`,
      // Double-write's writes: answered after side A alone (the feeds carry them), or once B holds them (read-barrier.ts).
      `migration_write_answer:${this.ring.carry.answerAfterA ? 'after-side-a' : 'converging'}`,
    ];
  }

  /**
   * A barrier: resolves once every change made on `address` before now has reached side B (null),
   * or with why it could not be confirmed. Null at once when nothing needs to wait.
   */
  after(address: string): Promise<string | null> | null {
    const node = this.nodes.get(address);
    if (node === undefined) return null;
    return new Promise((resolve) => {
      let settled = false;
      const finish = (problem: string | null): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(problem);
      };
      const timer = setTimeout(() => {
        this.count.barrierTimeouts++;
        const why = node.feed?.ready === true ? `changes heard on ${address} not copied to side B within ${BARRIER_WAIT_MS} ms` : `the change feed of ${address} is down`;
        log.warn({ node: address, why }, 'migration: a write\'s changes were not confirmed on side B in time; they are copied when the node is re-walked or the copy succeeds');
        finish(why);
      }, BARRIER_WAIT_MS);
      const feed = node.feed;
      if (feed === null || !feed.ready) {
        node.coverWaiters.push(() => finish(null));
        return;
      }
      feed.fence(() => {
        // Lost meanwhile: the re-walk that covers the gap carries this write too.
        if (node.feed !== feed || !feed.ready) return node.coverWaiters.push(() => finish(null));
        this.whenCopied(node, node.heard, () => finish(node.failed.size > 0 ? node.lastFailure : null));
      });
    });
  }

  /** Every node of side A may have had changes no feed heard (start-gap.ts): each is re-walked. */
  gapEverywhere(reason: string): void {
    for (const node of this.nodes.values()) this.openGap(node, reason);
  }

  /** Every change heard so far on every node is on side B (before `done` fences B); what could not be confirmed. */
  async settle(): Promise<string[]> {
    const problems = await Promise.all([...this.nodes.keys()].map((a) => this.after(a)));
    return problems.filter((p): p is string => p !== null);
  }

  private sync(): void {
    if (this.stopped) return;
    const placement = this.ring.placement;
    const wanted = new Set(placement.converges ? placement.from.masters() : []);
    for (const [address, node] of this.nodes) {
      if (wanted.has(address)) continue;
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
    if (wanted.size > 0) this.timer ??= setInterval(() => (this.sync(), void this.reading.check()), SYNC_EVERY_MS).unref();
    else if (this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private openFeed(node: NodeChanges): void {
    const feed: ChangeFeed = new ChangeFeed(node.address, this.ctx.pool, {
      ready: () => {
        if (node.gapSince !== null) void this.rewalk(node);
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
    });
    node.feed = feed;
  }

  private drop(node: NodeChanges): void {
    const feed = node.feed;
    node.feed = null;
    feed?.close();
    node.pending.clear();
    node.failed.clear();
    for (const w of node.copyWaiters.splice(0)) w.done();
    for (const w of node.coverWaiters.splice(0)) w();
  }

  private heard(node: NodeChanges, keys: Buffer[] | null): void {
    node.heard++;
    const closing = closingPlace(this.ring.placement);
    if (keys !== null && closing !== null && closing.address === node.address && keys.some((k) => k.toString('latin1') === closing.key)) {
      this.closingCheck = this.closingCheck.then(() => this.checkClosing());
    }
    const reading = closing === null ? null : readingPlace(this.ring.placement);
    if (keys !== null && reading !== null && reading.address === node.address && keys.some((k) => k.toString('latin1') === reading.key)) this.reading.heard();
    if (keys === null) {
      // FLUSHALL/FLUSHDB: the keys are gone from A and the feed names none of them.
      this.openGap(node, 'the node was flushed');
    } else {
      for (const key of keys) {
        if (isBookkeepingKey(key)) continue;
        node.pending.set(key.toString('latin1'), { key, force: false });
      }
    }
    if (!node.draining) void this.drain(node);
  }

  /**
   * The closing hash changed (closing.ts): while it names a closer, hold writes, let those in
   * flight finish and the feeds catch up, then acknowledge; once it is gone, write again.
   */
  private async checkClosing(): Promise<void> {
    const placement = this.ring.placement;
    if (!placement.converges) return;
    const id = this.selfId() || 'slotproxy';
    try {
      const state = decodeReply(await closingCall(this.ctx, placement, (key) => ['HMGET', key, 'by', id], this.ctx.forward.retryWindowMs), true);
      const [by, acked] = Array.isArray(state) ? state : [null, null];
      if (by === null || by === undefined) {
        if (this.holding) log.info('migration: side A is no longer closing; writes go on');
        this.holding = false;
        this.ring.releaseWrites();
        return;
      }
      // The switch may have happened while the hash was read: then there is nothing to hold.
      if (!this.ring.placement.converges) return;
      if (!this.holding) log.info({ by: String(by) }, 'migration: side A is closing for done; writes are held until this proxy switches');
      this.holding = true;
      this.ring.holdWrites(CLOSING_TTL_MS);
      if (acked !== null && acked !== undefined) return;
      await this.ring.drained();
      await this.ring.carry.drained();
      await this.settle();
      await closingCall(this.ctx, placement, (key) => ['EVAL', ACK_SCRIPT, '1', key, id], this.ctx.forward.retryWindowMs);
    } catch (err) {
      log.warn({ err: err instanceof Error ? err.message : String(err) }, 'migration: cannot read or acknowledge side A\'s closing');
    }
  }

  private async drain(node: NodeChanges): Promise<void> {
    node.draining = true;
    try {
      while (node.pending.size > 0) {
        const through = node.heard;
        const batch = [...node.pending.values()];
        node.pending.clear();
        await this.copy(node, batch);
        this.copied(node, node.pending.size === 0 ? node.heard : through);
      }
      this.copied(node, node.heard);
    } finally {
      node.draining = false;
    }
  }

  private copied(node: NodeChanges, through: number): void {
    node.copiedThrough = Math.max(node.copiedThrough, through);
    let i = 0;
    while (i < node.copyWaiters.length) {
      if (node.copyWaiters[i].seq <= node.copiedThrough) node.copyWaiters.splice(i, 1)[0].done();
      else i++;
    }
  }

  private whenCopied(node: NodeChanges, seq: number, done: () => void): void {
    if (node.copiedThrough >= seq && !node.draining) return done();
    node.copyWaiters.push({ seq, done });
  }

  /** Copies the keys that move; a failed one is kept and tried again, forcibly (its snapshot was taken). */
  private async copy(node: NodeChanges, batch: readonly Pending[]): Promise<void> {
    const force = new Set(batch.filter((p) => p.force).map((p) => p.key.toString('latin1')));
    const placement = this.ring.placement;
    // On a ring A, a key changed on a node that does not own it in A is side B's write there (an
    // APPLY, when the rings share nodes): nothing to copy. (A cluster A's map may lag a reshard.)
    const targets = movingTargets(placement, batch.map((p) => p.key), node.address);
    const forced = targets.filter((t) => force.has(t.key.toString('latin1')));
    const groups = groupByBookkeeping(targets.filter((t) => !force.has(t.key.toString('latin1'))));
    await Promise.all([...forced.map((t) => this.copyOne(node, t)), ...groups.map((g) => this.copyChanged(node, g))]);
  }

  /** Keys sharing a node and their bookkeeping: one script on A snapshots those that changed. */
  private async copyChanged(node: NodeChanges, group: readonly CopyTarget[]): Promise<void> {
    const t0 = group[0];
    let snaps: (Snapshot | null)[];
    try {
      snaps = parseSnapshotsIfChanged(await this.script(t0.fromOwners, t0.from, (sha) => snapshotChangedCommand(group.map((t) => t.key), sha, t0.fromBook)), group.length);
    } catch (err) {
      // Unknown whether any snapshot was taken: the keys are tried again, forcibly.
      for (const t of group) this.failed(node, t, err);
      return;
    }
    const changed = group.map((t, i) => ({ t, snap: snaps[i] })).filter((c): c is { t: CopyTarget; snap: Snapshot } => c.snap !== null);
    this.count.unchanged += group.length - changed.length;
    for (const t of group) node.failed.delete(t.key.toString('latin1'));
    // As few APPLY scripts as B allows (apply-burst.ts: one per ring node; on a cluster B one per
    // node for keys of any of its slots, per slot when that fails). A script's keys share a slot,
    // so they land on B together, or all meet the fence.
    if (changed.length === 0) return;
    const outcomes = await applyBurst(this.ctx, changed.map((c) => c.t), changed.map((c) => c.snap), LANE);
    outcomes.forEach((outcome, i) => {
      if (outcome instanceof Error) return this.failed(node, changed[i].t, outcome);
      if (outcome.kind === 'applied') this.count.copied++;
      else if (outcome.kind === 'fenced' && outcome.version < changed[i].snap.version) this.count.missedAfterFence++;
    });
  }

  /** One key, snapshot forced (a retry, or a key found on side B by a re-walk). */
  private async copyOne(node: NodeChanges, t: CopyTarget): Promise<void> {
    let snap: Snapshot;
    try {
      snap = parseSnapshot(await this.script(t.fromOwners, t.from, (sha) => snapshotCommand(t.key, sha, t.fromBook)));
    } catch (err) {
      return this.failed(node, t, err);
    }
    await this.applyOne(node, t, snap);
  }

  /** `snap` (null: unchanged, nothing to send) applied on the key's owner in B. */
  private async applyOne(node: NodeChanges, t: CopyTarget, snap: Snapshot | null): Promise<void> {
    const id = t.key.toString('latin1');
    try {
      if (snap === null) this.count.unchanged++;
      else {
        const outcome = parseApply(await this.script(t.toOwners, t.to, (sha) => applyCommand(t.key, snap, sha, t.toBook)));
        if (outcome.kind === 'applied') this.count.copied++;
        else if (outcome.kind === 'fenced' && outcome.version < snap.version) this.count.missedAfterFence++;
      }
      node.failed.delete(id);
    } catch (err) {
      // The snapshot is taken (and its fingerprint kept): only a forced one carries this state now.
      this.failed(node, t, err);
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
      if (this.nodes.get(node.address) !== node || node.failed.size === 0) return;
      for (const [id, key] of node.failed) node.pending.set(id, { key, force: true });
      if (!node.draining) void this.drain(node);
    }, RETRY_FAILED_MS).unref();
  }

  /** A migration script by SHA1; by body where the node does not hold it (a restart, a failover). */
  private script(owners: SlotOwners | null, address: string, command: (bySha: boolean) => (Buffer | string)[]): Promise<Buffer> {
    return migrationScript(this.ctx, owners, address, command, LANE);
  }

  private openGap(node: NodeChanges, reason: string): void {
    node.gapEpoch++;
    node.gapSince ??= Date.now();
    node.gapReason = reason;
    this.count.gaps++;
    log.warn({ node: node.address, reason }, 'migration: changes on this node may have gone unseen; it is re-walked once its change feed is up');
    if (node.feed?.ready === true) void this.rewalk(node);
  }

  /**
   * Covers a gap: every key of the node that moves, and every key of side B that belongs to it,
   * copied again. Keys changed meanwhile are also named by the feed (up before the walk began).
   */
  private async rewalk(node: NodeChanges): Promise<void> {
    if (node.rewalking || this.stopped) return;
    node.rewalking = true;
    const epoch = node.gapEpoch;
    this.count.rewalks++;
    try {
      const placement = this.ring.placement;
      const to = placement.to;
      const ownKey = (k: Buffer): boolean => !isBookkeepingKey(k) && ownerOfKey(placement.from, k) === node.address;
      await this.scan(node.address, async (keys) => this.copy(node, keys.filter(ownKey).map((key) => ({ key, force: false }))));
      for (const b of to?.masters() ?? []) {
        await this.scan(b, async (keys) => this.copy(node, keys.filter(ownKey).map((key) => ({ key, force: true }))));
      }
      if (node.gapEpoch === epoch && node.failed.size === 0 && node.feed?.ready === true && this.nodes.get(node.address) === node) {
        node.gapSince = null;
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
      if (this.nodes.get(node.address) === node && node.gapSince !== null && node.feed?.ready === true) void this.rewalk(node);
    }, RETRY_FAILED_MS).unref();
  }

  /** Every key of one node, a SCAN batch at a time. */
  private async scan(address: string, each: (keys: Buffer[]) => Promise<void>): Promise<void> {
    let cursor = '0';
    do {
      const reply = decodeReply(await request(this.ctx.pool.connection(address, LANE), ['SCAN', cursor, 'COUNT', SCAN_COUNT], this.ctx.forward.retryWindowMs), true);
      if (!Array.isArray(reply) || reply.length !== 2 || !Buffer.isBuffer(reply[0]) || !Array.isArray(reply[1])) throw new Error(`${address}: unexpected SCAN reply`);
      cursor = reply[0].toString('latin1');
      await each(reply[1].filter((k): k is Buffer => Buffer.isBuffer(k)));
    } while (cursor !== '0');
  }
}
