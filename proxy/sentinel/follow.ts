/**
 * The ring following its Sentinel masters (SPEC 6: failovers move no key, and no write goes to a
 * demoted master).
 *
 * - A master that moves (sentinel/masters.ts) moves its ring node: the placement is swapped for
 *   the same one with that node readdressed (sharding/migration.ts `readdressed`), on both rings
 *   of a migration. The node keeps its name, so every key keeps its node; requests dispatched from
 *   then on go to the new master, blocked commands are asked to move (RingRouter.swap).
 * - A request for a master that cannot be reached waits for the move (up to `failoverWaitMs`,
 *   then a clear error), retried at once when it comes (dispatch/forward.ts asks `retryAfter`).
 *   Requests that were on the wire to the master when it died get their error, as everywhere.
 * - Never writing to a demoted master: a node that answers READONLY, reports `ROLE` replica when
 *   the proxy connects to it, or whose connection is lost, has its master asked for again; the
 *   refused request waits for the answer like one that found its master down. And from the moment
 *   a sentinel starts promoting a replica (`+failover-state-send-slaveof-noone`, just before its
 *   SLAVEOF NO ONE) writes for that master wait for the move: the old master, if alive (a planned
 *   `SENTINEL FAILOVER`), would acknowledge them and drop them when it is made a replica. Writes
 *   sent before the event is heard may still be dropped: Sentinel sends SLAVEOF NO ONE one tick
 *   (50-100 ms) after it, and replication is asynchronous (docs/ring-mode.md says so).
 */
import { BackendPool } from '../backend/pool';
import { request } from '../backend/request';
import { SentinelFollower } from '../context';
import { RingRouter } from '../ring/router';
import * as errors from '../resp/errors';
import { decodeReply } from '../resp/decode-reply';
import { log } from '../telemetry/log';
import { SentinelMasters } from './masters';

/** A node's ROLE is checked once per connection burst, not per lane. */
const ROLE_CHECK_SPACING_MS = 1000;

export class MasterFollower implements SentinelFollower {
  /** Master name -> retries waiting for it to move (each also has a timer: its next try anyway). */
  private readonly waiting = new Map<string, Map<() => void, NodeJS.Timeout>>();
  private readonly roleCheckedAt = new Map<string, number>();
  /** Master name -> until when its writes wait for a promotion under way. */
  private readonly promoting = new Map<string, number>();
  private stopped = false;

  constructor(
    private readonly masters: SentinelMasters,
    private readonly ring: RingRouter,
    private readonly pool: BackendPool,
    private readonly options: { failoverWaitMs: number; queryTimeoutMs: number },
  ) {
    masters.onSwitch((name, from, to) => this.moved(name, from, to));
    masters.onPromotion((name, ended) => {
      if (!ended) return void this.promoting.set(name, Date.now() + options.failoverWaitMs);
      this.promoting.delete(name);
      this.wake(name);
    });
    pool.onConnectionReady((address) => void this.checkRole(address));
    pool.onConnectionLost((address) => {
      const name = this.currentName(address);
      if (name !== undefined) void masters.check(name, `connection to ${address} lost`);
    });
  }

  addressOf(name: string): string | undefined {
    return this.masters.addressOf(name);
  }

  learn(names: readonly string[]): Promise<void> {
    return this.masters.learn(names);
  }

  waitWindowMs(address: string): number | null {
    return this.masters.nameOf(address) === undefined ? null : this.options.failoverWaitMs;
  }

  masterNow(address: string): string | undefined {
    const name = this.masters.nameOf(address);
    return name === undefined ? undefined : this.masters.addressOf(name);
  }

  retryAfter(address: string, delayMs: number, retry: () => void): void {
    const name = this.masters.nameOf(address);
    if (name === undefined) {
      setTimeout(retry, delayMs);
      return;
    }
    // Moved already (the request was sent before the move): the new master takes it now.
    if (this.masters.addressOf(name) !== address) return void setImmediate(retry);
    let waiters = this.waiting.get(name);
    if (waiters === undefined) {
      waiters = new Map();
      this.waiting.set(name, waiters);
    }
    const all = waiters;
    const go = (): void => {
      clearTimeout(timer);
      all.delete(go);
      retry();
    };
    const timer = setTimeout(go, delayMs);
    all.set(go, timer);
  }

  holdsWrites(address: string): boolean {
    const name = this.currentName(address);
    const until = name === undefined ? undefined : this.promoting.get(name);
    if (name === undefined || until === undefined) return false;
    if (Date.now() < until) return true;
    this.promoting.delete(name);
    return false;
  }

  demoted(address: string): void {
    const name = this.masters.nameOf(address);
    if (name !== undefined) void this.masters.check(name, `${address} answered READONLY`);
  }

  gaveUp(address: string, cause: string): string {
    return errors.failoverNotDone(this.masters.nameOf(address) ?? address, address, cause, this.options.failoverWaitMs);
  }

  stop(): void {
    this.stopped = true;
    this.masters.stop();
    // The proxy is closing: its sessions go, and their requests with them.
    for (const waiters of this.waiting.values()) for (const timer of waiters.values()) clearTimeout(timer);
    this.waiting.clear();
  }

  private moved(name: string, from: string | undefined, to: string): void {
    if (this.stopped || from === undefined) return;
    this.ring.swap(this.ring.placement.readdressed(from, to));
    this.promoting.delete(name);
    // Requests waiting for a reconnect to the old address go to the new master now.
    this.pool.abandonConnecting(from);
    this.wake(name);
  }

  /** Every retry waiting on master `name` runs now. */
  private wake(name: string): void {
    const waiters = this.waiting.get(name);
    this.waiting.delete(name);
    for (const go of [...(waiters?.keys() ?? [])]) go();
  }

  /** The master `address` is the address of now, else undefined. */
  private currentName(address: string): string | undefined {
    const name = this.masters.nameOf(address);
    return name !== undefined && this.masters.addressOf(name) === address ? name : undefined;
  }

  /** A node the proxy just connected to as a master must be one: a replica has its master asked for. */
  private async checkRole(address: string): Promise<void> {
    const name = this.currentName(address);
    if (name === undefined || this.stopped) return;
    const now = Date.now();
    if (now - (this.roleCheckedAt.get(address) ?? 0) < ROLE_CHECK_SPACING_MS) return;
    this.roleCheckedAt.set(address, now);
    try {
      const role = decodeReply(await request(this.pool.connection(address, 0), ['ROLE'], this.options.queryTimeoutMs));
      if (!Array.isArray(role) || String(role[0]) === 'master') return;
      log.warn({ master: name, node: address, role: String(role[0]) }, 'a Sentinel master\'s node reports it is a replica; asking the sentinels');
      await this.masters.check(name, `${address} reports role ${String(role[0])}`);
    } catch {
      // The connection failed meanwhile: its loss asks the sentinels.
    }
  }
}
