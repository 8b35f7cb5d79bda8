/**
 * Side A closes before `done`. B's fence (fence.ts) alone keeps a write exact only when the proxy
 * can name its keys; a script's undeclared keys travel on the change feeds, behind the write, and
 * could meet the fence after the script's other keys had passed it. So a proxy entering `done`
 * first has every proxy of the fleet stop writing to A:
 *
 *   1. it writes CLOSING_KEY (a hash, on one node of A, `by` = its id, expiring in CLOSING_TTL_MS);
 *   2. every proxy hears that on its change feed of that node (change-copier.ts), holds its new
 *      writes (ring/router.ts), lets its writes in flight finish, waits until its feeds have
 *      copied what they heard, and acknowledges by adding its id to the hash;
 *   3. once every live proxy not yet in `done` has acknowledged, B is fenced and the phase switches.
 *
 * A proxy keeps holding writes until it is switched to `done` itself (its held writes then go to B)
 * or the hash goes away (expired, or removed by an aborted switch: they go to A again, and B's
 * fence keeps declared keys exact). Writes made straight on A's nodes are not held.
 *
 * The hash gone while the closer waits (a FLUSHALL, FLUSHDB or DEL on its node) fails the switch at
 * once: the acknowledgments went with it. A flush of that node is heard by every proxy as a
 * change of the hash (change-copier.ts), so none keeps holding writes for a closing that is gone.
 */
import { ProxyContext } from '../context';
import { decodeReply, errorText } from '../resp/decode-reply';
import { Placement } from '../../sharding/migration';
import { BOOKKEEPING_PREFIX, inSlot } from './converge';
import { ownersOf } from './copy-keys';
import { sideRequest } from './side-request';
import { describeProxies, ProxyRecord } from './fleet';
import { log } from '../telemetry/log';
import type { RingRouter } from '../ring/router';

export const CLOSING_KEY = `${BOOKKEEPING_PREFIX}closing`;
/** How long proxies hold their writes if the switch never comes (its proxy died, say). */
export const CLOSING_TTL_MS = 30_000;
const ACK_POLL_MS = 10;

/** The hash and its expiry in one step: a closer that dies cannot leave writes held for good. */
const OPEN_SCRIPT = `redis.call('HSET', KEYS[1], 'by', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

/** An acknowledgment adds to an open closing only (after expiry it must not bring back a hash). */
export const ACK_SCRIPT = `if redis.call('HEXISTS', KEYS[1], 'by') == 1 then redis.call('HSET', KEYS[1], ARGV[1], 'stopped') end
return 1`;

/**
 * Where the closing hash (or another of the fleet's barriers, `name`: read-barrier.ts) lives on
 * side A: one node every proxy has a feed on.
 */
export function closingPlace(placement: Placement, name = CLOSING_KEY): { key: string; address: string } | null {
  const owners = ownersOf(placement.from);
  if (owners === null) {
    const address = placement.from.masters()[0];
    return address === undefined ? null : { key: name, address };
  }
  const address = owners.ownerOf(0);
  return address === null ? null : { key: inSlot(name, 0), address };
}

/** One request to the closing hash's (or barrier `name`'s) node (a cluster A's redirects followed). */
export async function closingCall(ctx: ProxyContext, placement: Placement, args: (key: string) => string[], timeoutMs: number, name = CLOSING_KEY): Promise<Buffer> {
  const place = closingPlace(placement, name);
  if (place === null) throw new Error('side A has no node');
  const frame = await sideRequest(ctx.pool, ownersOf(placement.from), place.address, args(place.key), { lane: 0, timeoutMs, retryWindowMs: timeoutMs });
  const err = errorText(frame);
  if (err !== null) throw new Error(`${place.address}: ${err}`);
  return frame;
}

/**
 * Why a barrier fails when its hash (`name`) vanished from the coordination node while the fleet
 * confirmed it: no confirmation can arrive any more.
 */
export function coordinationKeyGone(placement: Placement, name: string): Error {
  const place = closingPlace(placement, name);
  const address = place?.address ?? 'side A';
  return new Error(
    `the fleet's coordination keys on ${address} are gone: ${place?.key ?? name} vanished while the proxies confirmed it (a FLUSHALL, FLUSHDB or DEL on ${address} erased it, or another switch removed it), so no confirmation can arrive; switch again`,
  );
}

/**
 * Steps 1 and 3: resolves once every proxy of `fleet` not in `done` has stopped writing to A;
 * throws (and removes the hash, so they write again) when one does not say so within `timeoutMs`.
 */
export async function closeSideA(ctx: ProxyContext, placement: Placement, selfId: string, fleet: readonly ProxyRecord[], timeoutMs: number): Promise<void> {
  await closingCall(ctx, placement, (key) => ['EVAL', OPEN_SCRIPT, '1', key, selfId || 'slotproxy', String(CLOSING_TTL_MS)], timeoutMs);
  const waitFor = fleet.filter((r) => r.phase !== 'done');
  if (waitFor.length === 0) return;
  const until = Date.now() + timeoutMs;
  for (;;) {
    const acked = await closingCall(ctx, placement, (key) => ['HMGET', key, 'by', ...waitFor.map((r) => r.id)], timeoutMs);
    const reply = decodeReply(acked, true);
    const fields = Array.isArray(reply) ? reply : [];
    if (fields[0] === null || fields[0] === undefined) throw coordinationKeyGone(placement, CLOSING_KEY);
    const missing = waitFor.filter((_, i) => fields[i + 1] === null || fields[i + 1] === undefined);
    if (missing.length === 0) return;
    if (Date.now() > until) {
      await closingCall(ctx, placement, (key) => ['DEL', key], timeoutMs).catch(() => undefined);
      throw new Error(`these proxies did not stop writing to side A within ${timeoutMs} ms: ${describeProxies(missing)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, ACK_POLL_MS));
  }
}

/** What step 2 needs of the change copier (change-copier.ts). */
export interface ClosingFeeds {
  settle(): Promise<string[]>;
  selfId(): string;
}

/** Step 2, for every proxy: the closing hash changed (its change feed named it). */
export class ClosingWatch {
  private holding = false;
  /** One check at a time. */
  private check: Promise<void> = Promise.resolve();

  constructor(
    private readonly ctx: ProxyContext,
    private readonly ring: RingRouter,
    private readonly feeds: ClosingFeeds,
  ) {}

  heard(): void {
    this.check = this.check.then(() => this.checkClosing());
  }

  /**
   * While the hash names a closer, hold writes, let those in flight finish and the feeds catch up,
   * then acknowledge; once it is gone, write again.
   */
  private async checkClosing(): Promise<void> {
    const placement = this.ring.placement;
    if (!placement.converges) return;
    const id = this.feeds.selfId() || 'slotproxy';
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
      await this.feeds.settle();
      await closingCall(this.ctx, placement, (key) => ['EVAL', ACK_SCRIPT, '1', key, id], this.ctx.forward.retryWindowMs);
    } catch (err) {
      log.warn({ err: err instanceof Error ? err.message : String(err) }, 'migration: cannot read or acknowledge side A\'s closing');
    }
  }
}
