/**
 * One copier per node of side A for the whole fleet, not one per proxy (docs/migration.md, "Many
 * proxies"). Every proxy keeps a change feed on every node of A (it hears the fleet's barriers
 * there, and notices its own gaps), but only the proxy holding a node's copier snapshots and
 * applies what that node's feed names (change-copier.ts).
 *
 * Who holds which node is kept in the fleet's registry (fleet.ts, registration.ts), not in the
 * keyspace: a proxy names the nodes it copies in its registration (`copies`), renewed every beat.
 * Every TICK_MS each proxy reads the fleet and, per node of A:
 *   - a node no live proxy names is taken by the live converging proxy ranking highest for it
 *     (rendezvous hashing of proxy id and node, so the nodes spread over the fleet), or by any
 *     proxy once it has gone unnamed for UNHELD_TAKE_MS (views of the fleet may differ);
 *   - a node named by several (taken at once) stays with the highest ranking; the others give it up.
 * A proxy that dies loses its registration at once (its connections close), one that hangs after
 * FLEET_STALE_SECONDS; the next tick of another proxy takes its nodes over. A proxy that cannot read
 * the fleet for UNHELD_TAKE_MS copies every node itself. A proxy whose own ticks stalled for
 * STALL_MS (SIGSTOP, a host frozen, a pause long enough for the fleet to count it gone) gives up
 * every node it holds at once, before its next round: another may copy them now. It takes a node
 * again only as any proxy takes an unheld one, as a takeover (standby keys or a re-walk), never by
 * rank over the proxy that took it meanwhile.
 *
 * A takeover carries what changed since the last holder last copied, heard by no copier (unless
 * that holder went on to done: it closed side A first): the keys the taker stood by for
 * (standby.ts), or, when those may not be all, a re-walk of the node before it counts as covered. A node taken with no holder ever seen by this proxy needs no
 * re-walk only while the history copy has not begun (it will carry whatever changed, as in
 * start-gap.ts); otherwise it is carried as a takeover.
 */
import crypto from 'node:crypto';
import { ProxyContext } from '../context';
import { decodeReply, errorText } from '../resp/decode-reply';
import { Placement } from '../../sharding/migration';
import { BOOKKEEPING_PREFIX } from './converge';
import { closingPlace } from './closing';
import { ownersOf } from './copy-keys';
import { sideRequest } from './side-request';
import { FLEET_HEARTBEAT_MS, FLEET_STALE_SECONDS, ProxyRecord } from './fleet';
import { log } from '../telemetry/log';
import { readFeedsCopyProgress } from './copy-progress';

export const TICK_MS = 500;
/** A node no proxy names for this long is taken by whoever sees it so, ranking first or not. */
export const UNHELD_TAKE_MS = 2000;
/** A holder read longer ago than this is not known any more (the fleet's own staleness bound). */
export const VIEW_FRESH_MS = 3000;
/**
 * A gap this long between two ticks: the fleet may have counted this proxy gone (its registration
 * is renewed every FLEET_HEARTBEAT_MS, and stale after FLEET_STALE_SECONDS).
 */
export const STALL_MS = FLEET_STALE_SECONDS * 1000 - FLEET_HEARTBEAT_MS;
/** The barrier marks of carried-mark.ts, on the coordination node. */
export const COPIERS_KEY = `${BOOKKEEPING_PREFIX}copiers`;

/** What one tick found for one node of side A. */
export interface LeaseView {
  /** The holder's proxy id ('' while nobody holds it) and the state of its feed of the node. */
  holder: string;
  state: string;
  /** 'acquired': this proxy took it now; 'renewed': it holds it; 'other': it does not. */
  kind: 'acquired' | 'renewed' | 'other';
  /** On 'acquired': why changes no copier copied may exist (another proxy held it, the copy has begun), '' when none can. */
  takeover: string;
}

/** A request to the coordination node (closing.ts's closingPlace); `args` gets the key of each bookkeeping name there. */
export async function coordinationCall(ctx: ProxyContext, placement: Placement, args: (keyOf: (name: string) => string) => string[], timeoutMs: number): Promise<unknown> {
  const place = closingPlace(placement, COPIERS_KEY);
  if (place === null) throw new Error('side A has no node');
  const keyOf = (name: string): string => closingPlace(placement, name)?.key ?? name;
  const frame = await sideRequest(ctx.pool, ownersOf(placement.from), place.address, args(keyOf), { lane: 0, timeoutMs, retryWindowMs: timeoutMs });
  const err = errorText(frame);
  if (err !== null) throw new Error(`${place.address}: ${err}`);
  return decodeReply(frame, true);
}

/** The key name of COPIERS_KEY on the coordination node (a change feed names it when a mark moves). */
export function copiersKeyOf(placement: Placement): { key: string; address: string } | null {
  return closingPlace(placement, COPIERS_KEY);
}

/** Rendezvous rank of proxy `id` for node `address`: the highest takes an unheld node. */
export function rank(id: string, address: string): number {
  return crypto.createHash('md5').update(`${id}|${address}`).digest().readUInt32BE(0);
}

/** The state a holder's record gives its feed of `address` (ProxyRecord.feeds: `live`, or the nodes not covered). */
function stateIn(record: ProxyRecord, address: string): string {
  if (record.feeds === 'live') return 'live';
  const entry = record.feeds.split(',').find((e) => e.slice(0, e.lastIndexOf('=')) === address);
  return entry === undefined ? (record.feeds === '-' ? 'starting' : 'live') : entry.slice(entry.lastIndexOf('=') + 1);
}

export interface LeaseNodes {
  /** The nodes of side A this proxy has a feed on, whether it holds their copier, and their state. */
  nodes(): { address: string; mine: boolean; state: string }[];
  seen(address: string, view: LeaseView): void;
  /** The fleet could not be read: holders unknown until the next tick. */
  failed(reason: string): void;
  /** A round is done (the barrier marks are read again then, should a push have been missed). */
  ticked(): void;
}

/** Takes, keeps and gives up copiers, every TICK_MS while started. */
export class CopierLeases {
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  /** Per node: the last other proxy seen holding it, and since when nobody has. */
  private readonly lastHolder = new Map<string, string>();
  private readonly unheldSince = new Map<string, number>();
  /** Since when the fleet cannot be read (null while it can). */
  private unreadSince: number | null = null;
  /** When this proxy last ran (its timer, a feed's push, its registration): a stall shows as a gap. */
  private lastRan = 0;
  /** Stalls seen: a round that spans one read the fleet before it, and is dropped. */
  private stalls = 0;
  /** Nodes given up after a stall: taken again only as a takeover. */
  private readonly stalledOff = new Set<string>();

  constructor(
    private readonly ctx: ProxyContext,
    private readonly placement: () => Placement,
    private readonly id: string,
    private readonly nodes: LeaseNodes,
    private readonly readFleet: (placement: Placement) => Promise<ProxyRecord[]>,
  ) {}

  start(): void {
    if (this.timer !== null) return;
    this.lastRan = Date.now();
    this.timer = setInterval(() => {
      this.checkStall();
      void this.tick();
    }, TICK_MS).unref();
    void this.tick();
  }

  /**
   * Called before this proxy copies what a feed names or says what it holds: after a stall, which
   * of its timers or sockets runs first is chance, and none may act on the copiers it held.
   */
  checkStall(): void {
    if (this.timer === null) return;
    const now = Date.now();
    const gap = now - this.lastRan;
    this.lastRan = now;
    if (gap >= STALL_MS) {
      this.stalls++;
      this.stalled(gap);
    }
  }

  /** This proxy did not run for `ms`: what it holds may be another's now, so it copies none of it. */
  private stalled(ms: number): void {
    const held = this.nodes.nodes().filter((n) => n.mine);
    if (held.length === 0) return;
    log.warn({ stalledMs: ms, nodes: held.map((n) => n.address) }, 'migration: this proxy stalled long enough for the fleet to count it gone; it gives up the copiers it held');
    for (const n of held) {
      this.stalledOff.add(n.address);
      this.nodes.seen(n.address, { holder: '', state: 'unheld', kind: 'other', takeover: '' });
    }
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** One round: resolves when its findings are handled (one at a time). */
  tick(): Promise<void> {
    this.ticking ??= this.round().finally(() => (this.ticking = null));
    return this.ticking;
  }

  private async round(): Promise<void> {
    const stalls = this.stalls;
    const nodes = this.nodes.nodes();
    if (nodes.length === 0) return;
    let fleet: ProxyRecord[];
    try {
      fleet = await this.readFleet(this.placement());
      this.unreadSince = null;
      this.checkStall();
      if (this.stalls !== stalls) return;
    } catch (err) {
      this.nodes.failed(err instanceof Error ? err.message : String(err));
      // Unknown for long: this proxy copies every node itself (two copiers cost work, none would lose changes).
      this.unreadSince ??= Date.now();
      if (Date.now() - this.unreadSince < UNHELD_TAKE_MS) return;
      for (const n of nodes) if (!n.mine) this.nodes.seen(n.address, { holder: this.id, state: n.state, kind: 'acquired', takeover: 'took its copier while the fleet cannot be read' });
      return;
    }
    const others = fleet.filter((r) => r.id !== this.id && (r.phase === 'double-write' || r.phase === 'read-new'));
    for (const n of nodes) {
      const a = n.address;
      const naming = others.filter((r) => r.copies.split(',').includes(a)).sort((x, y) => rank(y.id, a) - rank(x.id, a));
      const best = naming[0];
      if (best !== undefined) {
        this.lastHolder.set(a, best.id);
        this.unheldSince.delete(a);
      }
      if (n.mine) {
        // Taken by two at once: the lower ranking gives it up once the other names it.
        if (best !== undefined && rank(best.id, a) > rank(this.id, a)) this.nodes.seen(a, { holder: best.id, state: stateIn(best, a), kind: 'other', takeover: '' });
        else this.nodes.seen(a, { holder: this.id, state: n.state, kind: 'renewed', takeover: '' });
        continue;
      }
      if (best !== undefined) {
        this.nodes.seen(a, { holder: best.id, state: stateIn(best, a), kind: 'other', takeover: '' });
        continue;
      }
      const since = this.unheldSince.get(a) ?? Date.now();
      this.unheldSince.set(a, since);
      const first = [this.id, ...others.map((r) => r.id)].sort((x, y) => rank(y, a) - rank(x, a))[0];
      if (first !== this.id && Date.now() - since < UNHELD_TAKE_MS) {
        this.nodes.seen(a, { holder: '', state: 'unheld', kind: 'other', takeover: '' });
        continue;
      }
      this.unheldSince.delete(a);
      this.nodes.seen(a, { holder: this.id, state: n.state, kind: 'acquired', takeover: await this.whyRewalk(a, fleet) });
    }
    this.nodes.ticked();
  }

  /** Why taking `address` now must carry what no copier may have copied (standby keys or a re-walk), '' when nothing. */
  private async whyRewalk(address: string, fleet: readonly ProxyRecord[]): Promise<string> {
    const last = this.lastHolder.get(address);
    const stalled = this.stalledOff.delete(address);
    // Gone to done: it closed side A first (closing.ts: every proxy holds its writes from then
    // on, and it had copied what it heard), so nothing changed on A that B must still get.
    if (last !== undefined && fleet.some((r) => r.id === last && r.phase === 'done')) return '';
    if (last !== undefined) return `took over its copier from proxy ${last}`;
    if (stalled) return 'took its copier again after this proxy stalled';
    const copy = await readFeedsCopyProgress(this.ctx).catch(() => null);
    if (copy !== null && copy.copied === 0 && copy.nodesDone === 0) return '';
    return 'took its copier with no holder known, after the history copy began';
  }
}
