/**
 * The fleet barrier before any proxy reads from side B (a switch to `read-new`, or a start in it).
 * In double-write a proxy answers writes after side A alone (proxy/dispatch/carried-write.ts) and its change
 * feeds carry them to B later; a read from B through another proxy could miss such a write. So a
 * proxy about to read from B first has every proxy of the fleet stop answering writes before B
 * holds them:
 *
 *   1. it bumps `gen` in READING_KEY (a hash on the node of side A that holds the closing hash,
 *      closing.ts, expiring in READING_TTL_MS);
 *   2. every proxy hears that on its change feed of that node (change-copier.ts) and at once makes
 *      its writes converge again (answered once B holds them, converging-write.ts); it waits until
 *      its carried writes in flight are answered and its feeds have copied every change heard
 *      before (a PING on each feed, change-copier.ts), and then, if every feed of it is covered,
 *      acknowledges by setting its id to the `gen` it read;
 *   3. once every live proxy in double-write or read-new has acknowledged a `gen` at least its
 *      own, the proxy switches; otherwise the switch is refused with the proxies that did not.
 *
 * Every write acknowledged by any proxy before the switch is then on B (a carried one was copied
 * before its proxy acknowledged, a converging one before its client heard of it), and every later
 * write is answered only once B holds it. Writes go back to being answered after A alone only when
 * a proxy's fleet check (ReadBarrierWatch.check, every second in double-write) finds neither the
 * hash nor a live proxy in read-new. A switch begun meanwhile bumps the hash, which every proxy
 * hears and answers as above, so the check may look at stale facts without harm. Concurrent
 * switches each bump `gen` and each waits for its own, so `migrate phase read-new` may switch
 * every proxy at once.
 *
 * A FLUSHALL, FLUSHDB or DEL on that node erases the hash: no acknowledgment of it can arrive any
 * more, so the switch fails at once, naming the node (closing.ts, coordinationKeyGone). The hash
 * carries an `id`, set by the first switch of each incarnation, and an acknowledgment counts only
 * for the id it read: one computed before the erasure never lands in a hash opened after it.
 */
import { ProxyContext } from '../context';
import { decodeReply } from '../resp/decode-reply';
import { log } from '../telemetry/log';
import { Placement } from '../../sharding/migration';
import { RingRouter } from '../ring/router';
import { BOOKKEEPING_PREFIX } from './converge';
import crypto from 'node:crypto';
import { closingCall, closingPlace, coordinationKeyGone } from './closing';
import { ProxyRecord, describeProxies } from './fleet';
import { CATCH_UP_WAIT_MS, caughtUp } from './fence';
import { CATCHING_UP } from './followers';

export const READING_KEY = `${BOOKKEEPING_PREFIX}reading`;
/** How long after the last switch began proxies keep converging without seeing a proxy in read-new. */
export const READING_TTL_MS = 10_000;
const ACK_POLL_MS = 10;
/** How often the fleet is read while the barrier waits for proxies whose follows catch up. */
const CATCH_UP_LOOK_MS = 500;

/** True while the proxies `missing` may yet acknowledge: some follow of the fleet catches up (fence.ts, CATCH_UP_WAIT_MS). */
export type CatchingUp = (missing: readonly ProxyRecord[]) => Promise<boolean>;

/**
 * Whether `fleet` (read now) still has every proxy of `missing`, and some proxy's record names a
 * follow catching up: a proxy acknowledges only once the follows its writes wait on are live.
 */
export function fleetCatchingUp(fleet: readonly ProxyRecord[], missing: readonly ProxyRecord[]): boolean {
  const live = new Set(fleet.map((r) => r.id));
  const catching = (feeds: string): boolean => feeds.split(',').some((e) => CATCHING_UP.has(e.slice(e.lastIndexOf('=') + 1)) || e.endsWith('=starting'));
  return missing.every((r) => live.has(r.id)) && fleet.some((r) => r.feeds !== 'live' && r.feeds !== '-' && catching(r.feeds));
}

/** ARGV: the expiry, a new id should the hash have none. Returns the new `gen` and the hash's id. */
const OPEN_SCRIPT = `redis.call('HSETNX', KEYS[1], 'id', ARGV[2])
local g = redis.call('HINCRBY', KEYS[1], 'gen', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {g, redis.call('HGET', KEYS[1], 'id')}`;

/** An acknowledgment only raises a proxy's `gen`, and only in the hash it read (ARGV[3]: its id). */
const ACK_SCRIPT = `if redis.call('EXISTS', KEYS[1]) == 0 or (redis.call('HGET', KEYS[1], 'id') or '') ~= ARGV[3] then return 0 end
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > cur then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1`;

/** Where the read barrier's hash lives on side A. */
export function readingPlace(placement: Placement): { key: string; address: string } | null {
  return closingPlace(placement, READING_KEY);
}

/**
 * Steps 1 and 3, for the proxy about to read from B: resolves once every proxy of `fleet` that
 * converges has acknowledged; throws, naming those that did not, after `timeoutMs`.
 */
export async function raiseReadBarrier(ctx: ProxyContext, placement: Placement, fleet: readonly ProxyRecord[], timeoutMs: number, catchingUp: CatchingUp = async () => false): Promise<void> {
  const call = (args: (key: string) => string[]): Promise<Buffer> => closingCall(ctx, placement, args, timeoutMs, READING_KEY);
  const open = call((key) => ['EVAL', OPEN_SCRIPT, '1', key, String(READING_TTL_MS), crypto.randomBytes(8).toString('hex')]);
  const waitFor = fleet.filter((r) => r.phase === 'double-write' || r.phase === 'read-new');
  if (waitFor.length === 0) {
    // Nobody answers after A now; the hash only keeps a proxy starting meanwhile converging, so a
    // node that refuses it (a back-end user that may not write there) does not stop the switch.
    await open.catch(() => undefined);
    return;
  }
  const opened = decodeReply(await open, true);
  const [gen, id] = Array.isArray(opened) ? [Number(opened[0]), String(opened[1] ?? '')] : [NaN, ''];
  if (!Number.isFinite(gen)) throw new Error(`unexpected reply to the read barrier: ${String(opened)}`);
  const until = Date.now() + timeoutMs;
  const longest = Date.now() + Math.max(timeoutMs, CATCH_UP_WAIT_MS);
  let lookedAt = 0;
  let stillCatchingUp = false;
  for (;;) {
    const reply = decodeReply(await call((key) => ['HMGET', key, 'id', ...waitFor.map((r) => r.id)]), true);
    const fields = Array.isArray(reply) ? reply : [];
    // Erased meanwhile (and perhaps opened again by another switch): the acknowledgments are gone with it.
    if (String(fields[0] ?? '') !== id) throw coordinationKeyGone(placement, READING_KEY);
    const missing = waitFor.filter((_, i) => Number(String(fields[i + 1] ?? 0)) < gen);
    if (missing.length === 0) return;
    const now = Date.now();
    if (now > until) {
      // Past the bound, waited on (up to CATCH_UP_WAIT_MS) while each proxy missing says a follow of it catches up.
      if (now - lookedAt >= CATCH_UP_LOOK_MS) {
        lookedAt = now;
        stillCatchingUp = await catchingUp(missing).catch(() => false);
      }
      const why = stillCatchingUp ? `, their follows still catching up after ${Math.round(CATCH_UP_WAIT_MS / 1000)} s` : '';
      if (!stillCatchingUp || now > longest) throw new Error(`these proxies did not confirm within ${stillCatchingUp ? CATCH_UP_WAIT_MS : timeoutMs} ms that every write they answered is on side B${why}: ${describeProxies(missing)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, ACK_POLL_MS));
  }
}

/** What step 2 needs of the change copier. */
export interface FeedsOfProxy {
  settle(): Promise<string[]>;
  uncovered(): string[];
  catchingUp(): boolean;
  selfId(): string;
}

/** Step 2, and the check that lets writes be answered after A again. */
export class ReadBarrierWatch {
  private acks: Promise<void> = Promise.resolve();
  private checking = false;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly ring: RingRouter,
    private readonly feeds: FeedsOfProxy,
    private readonly readFleet: (placement: Placement) => Promise<ProxyRecord[]>,
  ) {}

  /** The hash changed (a proxy is about to read from B): converge now, acknowledge once caught up. */
  heard(): void {
    this.ring.carry.converge();
    this.acks = this.acks.then(() => this.acknowledge());
  }

  private async acknowledge(): Promise<void> {
    const placement = this.ring.placement;
    if (!placement.converges) return;
    const id = this.feeds.selfId() || 'slotproxy';
    const call = (args: (key: string) => string[]): Promise<Buffer> => closingCall(this.ctx, placement, args, this.ctx.forward.retryWindowMs, READING_KEY);
    try {
      const read = decodeReply(await call((key) => ['HMGET', key, 'gen', 'id']), true);
      const [gen, hashId] = Array.isArray(read) ? read : [null, null];
      if (!Buffer.isBuffer(gen)) return;
      await this.ring.carry.drained();
      // A follow in a full sync (here, or at the proxy following a node): its writes reach B once it is live.
      await caughtUp(this.feeds, CATCH_UP_WAIT_MS);
      const open = [...(await this.feeds.settle()), ...this.feeds.uncovered()];
      if (open.length > 0) {
        log.warn({ uncovered: open }, 'migration: cannot confirm that every write this proxy answered is on side B; a switch to read-new waits');
        return;
      }
      await call((key) => ['EVAL', ACK_SCRIPT, '1', key, id, gen.toString('latin1'), Buffer.isBuffer(hashId) ? hashId.toString('latin1') : '']);
    } catch (err) {
      log.warn({ err: err instanceof Error ? err.message : String(err) }, 'migration: cannot read or acknowledge the read barrier');
    }
  }

  /** In double-write, while writes converge: answer them after A again once no proxy reads from B. */
  async check(): Promise<void> {
    const carry = this.ring.carry;
    const placement = this.ring.placement;
    if (this.checking || carry.answerAfterA || placement.phase !== 'double-write' || readingPlace(placement) === null) return;
    this.checking = true;
    const epoch = carry.epoch;
    try {
      const exists = decodeReply(await closingCall(this.ctx, placement, (key) => ['EXISTS', key], this.ctx.forward.retryWindowMs, READING_KEY), true);
      if (exists !== 0) return;
      const self = this.feeds.selfId();
      // Unregistered yet (self ''): nothing can tell this proxy's own record from the others.
      if (self === '') return;
      const fleet = await this.readFleet(placement);
      if (fleet.some((r) => r.phase === 'read-new' && r.id !== self)) return;
      if (this.ring.placement === placement) carry.answerAfterAFrom(epoch);
    } catch {
      // Unknown: writes keep converging; the next check tries again.
    } finally {
      this.checking = false;
    }
  }
}
