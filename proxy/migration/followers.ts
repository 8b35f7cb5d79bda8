/**
 * The replication carry's followers of this proxy: one NodeFollower (follow.ts) per node of side A
 * whose copier this proxy holds (copier-lease.ts decides; change-copier.ts says which), and the
 * barrier on offsets that a script's reply, the read barrier and the closing wait on:
 *
 *   ROLE on the node of A (its master_repl_offset now, so after every write already answered)
 *     -> resolves once the follower has applied through that offset on B.
 *
 * ROLE's of one event-loop turn are shared by every barrier on that node.
 */
import { ProxyContext } from '../context';
import { Placement } from '../../sharding/migration';
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';
import { NodeFollower } from './follow';
import { DEFAULT_FOLLOW_OPTIONS, FollowState } from './follow-options';
import { FollowCounts } from '../telemetry/follow-metrics';
import { FOLLOW_REQUEST_KEY, readRequest, readSyncRecord } from './follow-progress';

const LANE = 0;
/** How long a barrier handed on waits for its new node to be known (change-copier.ts bounds the whole barrier alike). */
const HAND_ON_WAIT_MS = 5000;

/**
 * States of a follow that is on its way to live by itself: starting, in a full sync (Redis waits
 * repl-diskless-sync-delay before sending the snapshot), restoring it, or a lost link retried. A
 * switch to read-new or done waits for these (bounded); `failed` and `stopped` are refused at once.
 */
export const CATCHING_UP: ReadonlySet<string> = new Set<FollowState>(['connecting', 'full-sync', 'loading', 'lost']);

/** ROLE on a followed node answered that it replicates `master` now. */
interface Demoted {
  master: string;
}

/** The change copier's view of side A: where a barrier a follow cannot finish goes. */
interface SideA {
  isNode(address: string): boolean;
  after(address: string): Promise<string | null> | null;
  /** The ring node that took `address`'s place (successors.ts). */
  successor(address: string): string | null;
}

/** A barrier this proxy's follow cannot finish: `handOn`'s barrier confirms it (NodeFollowers.handedOn). */
export interface HandOn {
  handOn: string;
}

/** What the follows of one node that this proxy stopped had counted. */
interface Retired {
  fullSyncs: number;
  resumes: number;
  spoolFulls: number;
}

export class NodeFollowers {
  private readonly followers = new Map<string, NodeFollower>();
  /** By node, what its stopped follows counted: counters never go back, and a node followed again counts on. */
  private readonly retired = new Map<string, Retired>();
  /** The offset read for the barriers of this turn, per node. */
  private readonly offsets = new Map<string, Promise<number | Demoted>>();

  constructor(
    private readonly ctx: ProxyContext,
    private readonly placement: () => Placement,
    /** Before a follow applies anything (copier-lease.ts checkStall). */
    private readonly beforeApply: () => void = () => undefined,
    /** Side A's nodes as the change copier knows them, and a barrier on any of them (change-copier.ts after). */
    private readonly sideA: SideA = { isNode: () => false, after: () => null, successor: () => null },
  ) {}

  /** This proxy copies `address` (`mine`) or not any more. */
  hold(address: string, mine: boolean): void {
    const f = this.followers.get(address);
    if (mine && f === undefined) {
      const spool = this.ctx.ring?.carry.spool;
      const options = { ...DEFAULT_FOLLOW_OPTIONS, ...(spool?.dir === undefined ? {} : { spoolDir: spool.dir }), ...(spool === null || spool === undefined ? {} : { spoolBytes: spool.maxBytes }), peer: (a: string) => this.followers.get(a) };
      const follower = new NodeFollower(this.ctx, address, this.placement, { ...options, beforeApply: this.beforeApply });
      this.followers.set(address, follower);
      void this.begin(address, follower);
    } else if (!mine && f !== undefined) this.stop(address);
  }

  /**
   * Before a follow starts, the copy tool's mark on its node (follow-progress.ts): its restore rate,
   * and its token; one no full sync answered yet (the record names another) makes the first sync a new one.
   */
  private async begin(address: string, f: NodeFollower): Promise<void> {
    try {
      const placement = this.placement();
      const [mark, record] = await Promise.all([readRequest(this.ctx, placement, address), readSyncRecord(this.ctx, placement, address)]);
      f.sync.pace.set(mark.rate);
      f.sync.progress.request = mark.token;
      if (mark.token !== '' && record?.request !== mark.token) f.sync.forced = true;
    } catch {
      // Side A's node not answering now: the follow says so itself.
    }
    if (this.followers.get(address) === f) f.start();
  }

  /** A bookkeeping key changed on `address` (its change feed): the copy tool's mark is read again. */
  heard(address: string, key: Buffer): void {
    if (key.toString('latin1').startsWith(FOLLOW_REQUEST_KEY)) void this.requested(address);
  }

  /** The copy tool's mark on `address`: its rate applied, a new token answered with a new full sync. */
  async requested(address: string): Promise<void> {
    const f = this.followers.get(address);
    if (f === undefined) return;
    const mark = await readRequest(this.ctx, this.placement(), address).catch(() => null);
    if (mark === null || this.followers.get(address) !== f) return;
    f.sync.pace.set(mark.rate);
    if (mark.token === f.sync.progress.request) return;
    f.sync.progress.request = mark.token;
    if (mark.token !== '') f.resync();
  }

  stop(address: string): void {
    const f = this.followers.get(address);
    if (f !== undefined) {
      const r = this.retiredOf(address);
      this.retired.set(address, { fullSyncs: r.fullSyncs + f.fullSyncs, resumes: r.resumes + f.resumes, spoolFulls: r.spoolFulls + f.intake.fulls });
      f.stop('this proxy no longer follows the node');
    }
    this.followers.delete(address);
  }

  private retiredOf(address: string): Retired {
    return this.retired.get(address) ?? { fullSyncs: 0, resumes: 0, spoolFulls: 0 };
  }

  stopAll(): void {
    for (const address of [...this.followers.keys()]) this.stop(address);
  }

  follower(address: string): NodeFollower | undefined {
    return this.followers.get(address);
  }

  stateOf(address: string): string {
    const f = this.followers.get(address);
    return f === undefined ? 'not followed here' : f.reason === '' ? f.state : `${f.state}: ${f.reason}`;
  }

  /**
   * Null once every change made on `address` before now is on B; else why not. A node demoted
   * since (a failover: the write it answered is in its new master's history, whose offsets go on
   * in the same count) is handed on to the master its ROLE names; a follow stopped under it (the
   * node left side A's masters, or its copier went to another proxy) is handed on as well
   * (`handOn`: the caller goes on with `handedOn`, its own time bound started anew).
   */
  async barrier(address: string): Promise<string | null | HandOn> {
    const f = this.followers.get(address);
    if (f === undefined) return `${address} is not followed by this proxy`;
    let offset: number | Demoted;
    try {
      offset = await this.offsetOf(address);
    } catch (err) {
      return `cannot read the replication offset of ${address}: ${err instanceof Error ? err.message : String(err)}`;
    }
    if (typeof offset !== 'number') return { handOn: offset.master };
    await f.appliedThrough(offset);
    if (f.state === 'stopped' && this.followers.get(address) !== f) {
      // Stopped under the barrier: the node was demoted (its master confirms), or another proxy copies it now.
      const now = await this.offsetOf(address).catch(() => null);
      return { handOn: now === null || typeof now === 'number' ? address : now.master };
    }
    return f.state === 'failed' || f.state === 'stopped' ? `the follow of ${address} ${f.state}: ${f.reason}` : null;
  }

  /**
   * The barrier of `address` (a promoted master, or the node's new copier holder), once it is a
   * node of side A for the change copier: the slot map learns a promotion soon after ROLE shows it;
   * an old ring master still answering as one is followed to the node that took its place.
   */
  async handedOn(address: string): Promise<string | null> {
    let to = address;
    for (const until = Date.now() + HAND_ON_WAIT_MS; !this.sideA.isNode(to); await new Promise((resolve) => setTimeout(resolve, 50))) {
      if (Date.now() >= until) return `${to} took over the node's writes but is not a master of side A here`;
      // Left side A's masters and still a master: a ring node Sentinel has not demoted yet.
      const now = to === address ? await this.offsetOf(address).catch(() => null) : null;
      if (now !== null && typeof now !== 'number') to = now.master;
      else to = this.sideA.successor(address) ?? to;
    }
    return (await this.sideA.after(to)) ?? null;
  }

  /** Nodes this proxy follows whose changes are not all being carried. */
  uncovered(): string[] {
    const out: string[] = [];
    for (const [address, f] of this.followers) if (f.state !== 'live') out.push(`${address}: replication ${f.state}${f.reason === '' ? '' : ` (${f.reason})`}`);
    return out;
  }

  /** False once some follow of this proxy failed or stopped (it will not catch up by itself). */
  catchingUp(): boolean {
    for (const f of this.followers.values()) if (f.state === 'failed' || f.state === 'stopped') return false;
    return true;
  }

  /** `address=state` of every follow that is not live (the fleet record names them). */
  openStates(): string[] {
    return [...this.followers.entries()].filter(([, f]) => f.state !== 'live').map(([a, f]) => `${a}=${f.state}`);
  }

  counts(): FollowCounts[] {
    const live = [...this.followers.entries()].map(([node, f]): FollowCounts => {
      const r = this.retiredOf(node);
      return { node, state: f.state, lagBytes: f.lagBytes, lagSeconds: f.lagSeconds, fullSyncs: r.fullSyncs + f.fullSyncs, resumes: r.resumes + f.resumes, spoolBytes: f.intake.spooled, spoolFulls: r.spoolFulls + f.intake.fulls, spoolFull: f.intake.full };
    });
    const gone = [...this.retired.entries()].filter(([node]) => !this.followers.has(node)).map(([node, r]): FollowCounts => ({ node, state: 'stopped', lagBytes: 0, lagSeconds: 0, ...r, spoolBytes: 0, spoolFull: false }));
    return [...live, ...gone];
  }

  infoLines(): string[] {
    if (this.followers.size === 0 && this.retired.size === 0) return [];
    const list = [...this.followers.entries()];
    const total = (field: 'fullSyncs' | 'resumes'): number => this.counts().reduce((n, c) => n + c[field], 0);
    return [
      `migration_follows:${list.map(([a, f]) => `${a}=${f.state}`).join(',')}`,
      `migration_follow_applied:${list.map(([a, f]) => `${a}=${f.applied}`).join(',')}`,
      `migration_follow_lag_bytes:${list.map(([a, f]) => `${a}=${f.lagBytes}`).join(',')}`,
      `migration_follow_lag_seconds:${list.map(([a, f]) => `${a}=${f.lagSeconds.toFixed(3)}`).join(',')}`,
      `migration_follow_full_syncs:${total('fullSyncs')}`,
      `migration_follow_resumes:${total('resumes')}`,
      `migration_follow_snapshot_restored:${list.reduce((n, [, f]) => n + f.snapshotRestored, 0)}`,
      `migration_follow_snapshot_ms:${list.map(([a, f]) => `${a}=${f.snapshotMs}`).join(',')}`,
      `migration_follow_spool_bytes:${list.map(([a, f]) => `${a}=${f.intake.spooled}`).join(',')}`,
      `migration_follow_spool_full:${list.map(([a, f]) => `${a}=${f.intake.fulls}`).join(',')}`,
    ];
  }

  /** The node's master_repl_offset, or the master it replicates now. */
  private offsetOf(address: string): Promise<number | Demoted> {
    let p = this.offsets.get(address);
    if (p === undefined) {
      p = request(this.ctx.pool.connection(address, LANE), ['ROLE'], this.ctx.forward.retryWindowMs).then((frame) => {
        const reply = decodeReply(frame);
        // ROLE of a replica: slave, its master's host and port, the link's state, its offset.
        if (Array.isArray(reply) && reply[0] === 'slave' && typeof reply[1] === 'string' && typeof reply[2] === 'number') return { master: `${reply[1]}:${reply[2]}` };
        if (!Array.isArray(reply) || reply[0] !== 'master') throw new Error(`ROLE answered ${frame.toString('latin1', 0, 40)}`);
        return Number(reply[1]);
      });
      this.offsets.set(address, p);
      setImmediate(() => this.offsets.delete(address));
    }
    return p;
  }
}
