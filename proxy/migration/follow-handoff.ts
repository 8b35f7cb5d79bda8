/**
 * A slot of a cluster side A that changes master while followed (a reshard, a master added): its
 * keys leave the old owner's stream (its writes, then MIGRATE's `DEL`) and arrive in the new
 * owner's (`RESTORE-ASKING` with the state MIGRATE read, writes redirected by `ASK`, then every
 * write once the slot is its), and the two streams are followed apart, by different proxies maybe,
 * in no order between them. B ends exact only if, for each key, the old owner's commands are
 * applied before the new owner's: else the old owner's `DEL` deletes the copy the new owner's
 * `RESTORE` carried, or its writes land a second time on top of the state that already holds them.
 *
 * The order comes from A itself: anything the old owner did to a key happened before the new
 * owner's command on it (MIGRATE deletes a key once the target holds it, and an `ASK` sends a
 * write to the target only for a key the source no longer holds). So before a command on a slot
 * the followed node did not hold settled, its follower reads every other master's offset (`ROLE`,
 * now, after the command happened) and waits until B holds that master's changes through it: its
 * follower's applied offset when it runs in this proxy, else its records on B. One such barrier
 * covers every command received before it began.
 *
 *   slot settled (held since the follow began, or since a barrier while the node owned it)  -> on
 *   slot not settled (importing, or newly owned)  -> barrier on every other master, then on
 *   slot settled and now another node's  -> leaving: the node's commands received so far on it
 *       (its writes before MIGRATE, MIGRATE's DEL) go on, they come before the new owner's;
 *       a later one (the slot coming back) waits for a barrier again
 *
 *   `RESTORE-ASKING` (MIGRATE's arrival)  -> a barrier first, whatever the slot map says now
 *
 * A follower new here that resumes (a restart, a takeover) does not know what the node's backlog
 * holds: a slot may have moved while nobody followed. So before its PSYNC it reads the node's
 * offset and the slots it imports (look()): a slot it neither serves nor imports is an old owner's
 * last commands through that offset (they go on: the new owner's follower waits for them, and
 * waiting here would apply a MIGRATE's DEL after the new owner's RESTORE), a slot it serves is
 * settled, and each arrival still waits. (An ASK-redirected write in that backlog, for a key the
 * old owner deleted just before, is the case left: nothing in the stream marks it.)
 *
 * A follower in a full sync is not waited for (its own snapshot is the later state, and it may
 * wait on this one); a barrier still open after BARRIER_CAP_MS goes on with a warning (two masters
 * resharding into each other at once can wait on each other).
 */
import { ProxyContext } from '../context';
import { KeySpace } from '../../sharding/key-space';
import { SLOT_COUNT } from '../../sharding/slot';
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';
import { ownersOf } from './copy-keys';
import { recordKeyOf } from './follow-node-keys';
import { log } from '../telemetry/log';
import { FollowRouter, Routed } from './follow-router';

const LANE = 0;
const POLL_MS = 20;
export const BARRIER_CAP_MS = 30_000;

/** What a barrier needs of another master's follower in this proxy. */
export interface PeerFollow {
  state: string;
  applied: number;
}

export class SlotHandoff {
  private readonly settled = new Set<number>();
  /** Slots that went to another node: the received offset then (commands through it are the old owner's last). */
  private readonly leaving = new Map<number, number>();
  /** Commands through this offset were received before the last barrier began. */
  private coveredThrough = -1;
  barriers = 0;
  private begun = false;
  /** The node as look() saw it before a resume: its offset, and the slots it imports. */
  private seen: { offset: number; importing: Set<number> } | null = null;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly source: string,
    private readonly from: () => KeySpace,
    private readonly to: () => KeySpace | null,
    private readonly peer: (address: string) => PeerFollow | undefined,
  ) {}

  private get cluster(): boolean {
    return this.from().kind === 'cluster';
  }

  /** Before a PSYNC: the node's offset and the slots it imports now (a cluster A), for begin(). */
  async look(): Promise<void> {
    this.seen = null;
    if (!this.cluster || this.begun) return;
    const connection = this.ctx.pool.connection(this.source, LANE);
    const [role, nodes] = await Promise.all([request(connection, ['ROLE'], this.ctx.forward.retryWindowMs), request(connection, ['CLUSTER', 'NODES'], this.ctx.forward.retryWindowMs)]).then((f) => f.map((x) => decodeReply(x)));
    if (!Array.isArray(role) || typeof nodes !== 'string') return;
    this.seen = { offset: Number(role[1]), importing: importingSlots(nodes) };
  }

  /** A resume: what this follower learnt of the node's stream still holds; a follower new here starts from what look() saw. */
  begin(): void {
    if (this.begun) return;
    this.reset();
    if (this.seen === null) return;
    for (let slot = 0; slot < SLOT_COUNT; slot++) if (!this.settled.has(slot) && !this.seen.importing.has(slot)) this.leaving.set(slot, this.seen.offset);
  }

  /** A full sync: the slots the node serves now are settled (its snapshot is restored after a barrier, follow.ts load). */
  reset(): void {
    this.begun = true;
    this.settled.clear();
    this.leaving.clear();
    this.coveredThrough = -1;
    if (!this.cluster) return;
    const from = this.from();
    for (let slot = 0; slot < SLOT_COUNT; slot++) if (from.addressOf(slot) === this.source) this.settled.add(slot);
  }

  /** Settled slots another node holds now are leaving, from `received` on (called every second). */
  watch(received: number): void {
    if (!this.cluster) return;
    const from = this.from();
    for (const slot of this.settled) {
      if (from.addressOf(slot) === this.source) continue;
      this.settled.delete(slot);
      this.leaving.set(slot, received);
    }
  }

  /** The barrier the routed command at `end` waits for first; null when none (the stream goes straight on). */
  ahead(end: number, routed: Routed, received: number, router: FollowRouter, arrival = false): Promise<void> | null {
    if (end <= this.coveredThrough || (routed.kind !== 'apply' && routed.kind !== 'resnapshot') || !this.cluster) return null;
    const keys = routed.kind === 'apply' ? routed.parts.flatMap((p) => p.keys) : routed.keys;
    if (!arrival && !this.needs(keys, end)) return null;
    const nodes = routed.kind === 'apply' ? routed.parts.map((p) => p.to) : keys.map((k) => router.ownerInB(k) ?? '');
    return this.barrier(received, keys, [...new Set(nodes)].filter((b) => b !== ''));
  }

  /** The command at `end` on `keys` waits for a barrier first. */
  needs(keys: readonly Buffer[], end: number): boolean {
    if (keys.length === 0 || end <= this.coveredThrough || !this.cluster) return false;
    const from = this.from();
    for (const k of keys) {
      const slot = from.shardOf(k);
      if (this.settled.has(slot)) continue;
      const left = this.leaving.get(slot);
      if (left !== undefined && end <= left) continue;
      return true;
    }
    return false;
  }

  /**
   * Every other master's changes made before now are on B. `received`: the stream's offset when
   * it began (what it covers); `keys` the command's (their nodes of B hold the records waited on).
   */
  async barrier(received: number, keys: readonly Buffer[], nodesOfB: readonly string[]): Promise<void> {
    const from = this.from();
    const mine = keys.map((k) => from.shardOf(k)).filter((s) => from.addressOf(s) === this.source);
    const started = Date.now();
    const open = await Promise.all(from.masters().filter((m) => m !== this.source).map((m) => this.caughtUp(m, nodesOfB, started + BARRIER_CAP_MS)));
    this.barriers++;
    const late = open.filter((m): m is string => m !== null);
    if (late.length > 0) log.warn({ node: this.source, waitingFor: late, ms: Date.now() - started }, 'migration: a slot moved between masters of side A, and the earlier owner\'s changes could not be confirmed on side B; the stream goes on');
    this.coveredThrough = Math.max(this.coveredThrough, received);
    for (const slot of mine) {
      this.settled.add(slot);
      this.leaving.delete(slot);
    }
  }

  /** Null once B holds `master`'s changes through its offset now (or it is not waited for); else `master`. */
  private async caughtUp(master: string, nodesOfB: readonly string[], deadline: number): Promise<string | null> {
    const local = this.peer(master);
    if (local !== undefined && (local.state === 'full-sync' || local.state === 'loading' || local.state === 'stopped' || local.state === 'failed')) return null;
    let offset: number;
    try {
      const role = decodeReply(await request(this.ctx.pool.connection(master, LANE), ['ROLE'], this.ctx.forward.retryWindowMs));
      if (!Array.isArray(role) || role[0] !== 'master') return null; // demoted or gone: its successor's stream carries on
      offset = Number(role[1]);
    } catch {
      return null;
    }
    while (Date.now() < deadline) {
      const now = this.peer(master);
      if (now !== undefined) {
        if (now.applied >= offset || now.state === 'full-sync' || now.state === 'loading' || now.state === 'stopped' || now.state === 'failed') return null;
      } else {
        const recorded = await this.recordedOn(master, nodesOfB);
        if (recorded === null || recorded >= offset) return null;
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    return master;
  }

  /** The lowest offset B's nodes `nodesOfB` recorded for `master`; null where one has none (never followed there). */
  private async recordedOn(master: string, nodesOfB: readonly string[]): Promise<number | null> {
    const to = this.to();
    if (to === null) return null;
    const owners = ownersOf(to);
    let lowest = Infinity;
    for (const b of nodesOfB) {
      const reply = decodeReply(await request(this.ctx.pool.connection(b, LANE), ['HGET', recordKeyOf(b, owners), master], this.ctx.forward.retryWindowMs));
      if (typeof reply !== 'string') return null;
      lowest = Math.min(lowest, Number(reply.split(' ')[1]));
    }
    return Number.isFinite(lowest) ? lowest : null;
  }
}

/** MIGRATE's RESTORE-ASKING: a key arriving from another master (its DEL there comes right after). */
export function isArrival(name: Buffer | undefined): boolean {
  return name !== undefined && name.length === 14 && name.toString('latin1').toLowerCase() === 'restore-asking';
}

/** The slots the `myself` line of CLUSTER NODES shows importing (`[slot-<-id]`). */
export function importingSlots(nodes: string): Set<number> {
  const out = new Set<number>();
  const mine = nodes.split('\n').find((l) => l.split(' ')[2]?.split(',').includes('myself'));
  for (const f of mine?.split(' ').slice(8) ?? []) {
    const m = /^\[(\d+)-<-/.exec(f);
    if (m !== null) out.add(Number(m[1]));
  }
  return out;
}
