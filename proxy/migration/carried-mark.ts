/**
 * Read-your-writes when another proxy holds a node's copier (copier-lease.ts). A barrier of
 * change-copier.ts (a script's reply, the read barrier's acknowledgment, entering done) waits until
 * every change made on a node before it is on side B. The holder of the node's copier checks that
 * on its own feed (a PING, then its copier catching up); any other proxy asks the holder:
 *
 *   1. it bumps `mark:<addr>` in COPIERS_KEY on the coordination node (HINCRBY: n);
 *   2. the holder hears the hash change on its feed of that node, reads the mark (m >= n), runs its
 *      own barrier on the node (a PING on its feed sent after reading m, so after the waiter's
 *      changes, then its copier catching up), and raises `carried:<addr>` to m;
 *   3. the waiter hears the hash change too, reads `carried:<addr>`, and is done once it is >= n.
 *
 * Every tick of copier-lease.ts (TICK_MS) reads them again, so a push missed (a feed that was down)
 * costs a tick, and a new holder serves the marks its predecessor left. Barriers of one turn of
 * the event loop share one mark.
 *
 * A FLUSHALL, FLUSHDB or DEL on the coordination node erases the hash, and its counters start again
 * from 0: a mark of before could then be met by a `carried` that served none of its changes, or
 * never be met. So the hash carries an `id`, set by the first bump of each incarnation; marks and
 * `carried` count only within one id. A waiter that finds another id (or none) bumps again, and a
 * holder's raise for an id that is gone is refused.
 */
import crypto from 'node:crypto';
import { ProxyContext } from '../context';
import { Placement } from '../../sharding/migration';
import { log } from '../telemetry/log';
import { COPIERS_KEY, coordinationCall } from './copier-lease';

/** ARGV: the mark's field, a new id should the hash have none. Returns the mark and the hash's id. */
const BUMP_SCRIPT = `redis.call('HSETNX', KEYS[1], 'id', ARGV[2])
return {redis.call('HINCRBY', KEYS[1], ARGV[1], 1), redis.call('HGET', KEYS[1], 'id')}`;

/** ARGV: the carried field, the mark served, the id it was read under (a raise for an erased hash is refused: 0). */
const RAISE_SCRIPT = `if (redis.call('HGET', KEYS[1], 'id') or '') ~= ARGV[3] then return 0 end
local c = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > c then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1`;

const TIMEOUT_MS = 5000;

export interface MarkHolder {
  /** True while this proxy holds `address`'s copier. */
  holds(address: string): boolean;
  /** Its own barrier on a node it holds: null once every change made before now is on side B. */
  ownBarrier(address: string): Promise<string | null>;
  /** Nodes of side A with a feed. */
  addresses(): string[];
}

export class CarriedMarks {
  /** Barriers waiting for `carried:<addr>` to reach their mark. */
  private readonly waiting = new Map<string, { mark: number; id: string; done: () => void }[]>();
  /** Barriers of this turn, one mark per node. */
  private readonly joining = new Map<string, (() => void)[]>();
  private reading: Promise<void> | null = null;
  private readAgain = false;
  private readonly serving = new Set<string>();
  private readonly serveAgain = new Set<string>();

  constructor(
    private readonly ctx: ProxyContext,
    private readonly placement: () => Placement,
    private readonly holder: MarkHolder,
  ) {}

  /** Resolves once the holder of `address`'s copier has carried every change made on it before now. */
  wait(address: string): Promise<void> {
    return new Promise((resolve) => this.join(address, resolve));
  }

  private join(address: string, done: () => void): void {
    let batch = this.joining.get(address);
    if (batch === undefined) {
      batch = [];
      this.joining.set(address, batch);
      setImmediate(() => void this.bump(address));
    }
    batch.push(done);
  }

  /** True once the holder confirmed every change made on `address` before now, false after `timeoutMs`. */
  confirmed(address: string, timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs).unref();
      void this.wait(address).then(() => (clearTimeout(timer), resolve(true)));
    });
  }

  /** Nothing waits any more (the copier stops). */
  clear(): void {
    this.waiting.clear();
    this.joining.clear();
  }

  /** COPIERS_KEY changed (a mark raised or carried): read what concerns this proxy. */
  heard(): void {
    if (this.reading !== null) {
      this.readAgain = true;
      return;
    }
    this.reading = this.read().finally(() => {
      this.reading = null;
      if (this.readAgain) {
        this.readAgain = false;
        this.heard();
      }
    });
  }

  /** What was read for one node. */
  private seen(address: string, id: string, mark: number, carried: number): void {
    this.release(address, id, carried);
    if (mark > carried && this.holder.holds(address)) this.serve(address, mark, id);
  }

  private async bump(address: string): Promise<void> {
    const batch = this.joining.get(address) ?? [];
    this.joining.delete(address);
    try {
      const reply = await coordinationCall(this.ctx, this.placement(), (keyOf) => ['EVAL', BUMP_SCRIPT, '1', keyOf(COPIERS_KEY), `mark:${address}`, crypto.randomBytes(8).toString('hex')], TIMEOUT_MS);
      const [mark, id] = Array.isArray(reply) ? [Number(reply[0]), String(reply[1] ?? '')] : [NaN, ''];
      if (!Number.isFinite(mark)) throw new Error(`unexpected reply to a mark: ${String(reply)}`);
      let list = this.waiting.get(address);
      if (list === undefined) this.waiting.set(address, (list = []));
      for (const done of batch) list.push({ mark, id, done });
    } catch (err) {
      // The barriers time out (change-copier.ts) and say the copy was not confirmed.
      log.warn({ node: address, err: err instanceof Error ? err.message : String(err) }, 'migration: cannot ask the copier holder to confirm a node\'s changes');
    }
  }

  private async read(): Promise<void> {
    const held = this.holder.addresses().filter((a) => this.holder.holds(a));
    const waited = [...this.waiting.keys()];
    if (held.length === 0 && waited.length === 0) return;
    const fields = ['id', ...held.flatMap((a) => [`mark:${a}`, `carried:${a}`]), ...waited.map((a) => `carried:${a}`)];
    try {
      const reply = await coordinationCall(this.ctx, this.placement(), (keyOf) => ['HMGET', keyOf(COPIERS_KEY), ...fields], TIMEOUT_MS);
      const raw = Array.isArray(reply) ? reply : [];
      const id = String(raw[0] ?? '');
      const values = raw.slice(1).map((v) => Number(String(v ?? 0)) || 0);
      held.forEach((a, i) => this.seen(a, id, values[2 * i], values[2 * i + 1]));
      waited.forEach((a, i) => this.release(a, id, values[2 * held.length + i]));
    } catch {
      // The next lease tick reads them again.
    }
  }

  private release(address: string, id: string, carried: number): void {
    const list = this.waiting.get(address);
    if (list === undefined) return;
    // Bumped in a hash since erased: its mark means nothing now, so a new one is asked for.
    const erased = list.filter((w) => w.id !== id);
    for (const w of erased) this.join(address, w.done);
    const left = list.filter((w) => w.id === id && w.mark > carried);
    for (const w of list) if (w.id === id && w.mark <= carried) w.done();
    if (left.length === 0) this.waiting.delete(address);
    else this.waiting.set(address, left);
  }

  /** The holder's step 2, one at a time per node; a mark raised meanwhile is served next. */
  private serve(address: string, mark: number, id: string): void {
    if (this.serving.has(address)) {
      this.serveAgain.add(address);
      return;
    }
    this.serving.add(address);
    void (async () => {
      try {
        let next: number | null = mark;
        while (next !== null) {
          // The mark is read before the barrier's PING: every change its waiters made is before it.
          const problem = await this.holder.ownBarrier(address);
          if (problem !== null || !this.holder.holds(address)) return;
          const value = next;
          const raised = await coordinationCall(this.ctx, this.placement(), (keyOf) => ['EVAL', RAISE_SCRIPT, '1', keyOf(COPIERS_KEY), `carried:${address}`, String(value), id], TIMEOUT_MS);
          // The hash was erased since the mark was read: its waiters bump again, and that is served anew.
          if (Number(raised) === 0) return;
          next = null;
          if (this.serveAgain.delete(address)) {
            const now = await coordinationCall(this.ctx, this.placement(), (keyOf) => ['HMGET', keyOf(COPIERS_KEY), 'id', `mark:${address}`], TIMEOUT_MS);
            const [nowId, m] = Array.isArray(now) ? [String(now[0] ?? ''), Number(String(now[1] ?? 0))] : ['', 0];
            if (nowId === id && m > value) next = m;
          }
        }
      } catch (err) {
        log.warn({ node: address, err: err instanceof Error ? err.message : String(err) }, 'migration: cannot confirm a node\'s changes to the proxies waiting for them');
      } finally {
        this.serving.delete(address);
        // A mark left unserved (a barrier that failed, a lease lost) is served from the next tick.
        this.serveAgain.delete(address);
      }
    })();
  }
}
