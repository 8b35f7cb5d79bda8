/**
 * One client request sent to the node that owns its keys, and the bounded loop that gets it a
 * reply: MOVED (patch the slot map, resend to the new owner), ASK (resend with ASKING first, on the
 * same connection, map unchanged), TRYAGAIN / CLUSTERDOWN / unreachable node (retry with backoff
 * until the retry window ends). Clients never see a redirection; they see the final reply, or the
 * last error once the bounds are spent.
 *
 * A request that was written to a connection that then died may have run: it is retried only when
 * the command is read-only, otherwise the client gets an error saying it may or may not have run.
 */
import { batchClock } from '../client/reply-flusher';
import { BackendRequest } from '../backend/connection';
import { ProxyContext } from '../context';
import { ReplyOwner, ReplySlot } from '../client/reply-slot';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { splitAddress } from '../backend/connection';
import { parseInteger } from '../commands/keys';
import { SLOT_COUNT } from '../../sharding/slot';

/** Sentinel shard: any master will do (keyless commands such as TIME, EVAL with no keys). */
export const ANY_MASTER = -1;

/**
 * The hash slot a command names as an argument (CLUSTER COUNTKEYSINSLOT/GETKEYSINSLOT: the `slot`
 * strategy), or ANY_MASTER when the argument is no slot: any node then answers Redis's error.
 */
export function slotArgument(arg: Buffer): number {
  const slot = parseInteger(arg);
  return slot !== null && slot >= 0 && slot < SLOT_COUNT ? slot : ANY_MASTER;
}

const ASKING = encode.command(['ASKING']);
const RETRY_BASE_MS = 20;
const RETRY_CAP_MS = 500;
/** How often a write held during a Sentinel promotion looks again (a move wakes it at once). */
export const PROMOTION_CHECK_MS = 50;

const M = 77;
const A = 65;
const T = 84;
const C = 67;
const R = 82;

/**
 * A node answered MOVED: the slot map of the side it belongs to learns it. During a migration the
 * placement router knows which side `answeredBy` is on; otherwise it is the cluster's map.
 */
export function noteMoved(ctx: ProxyContext, slot: number, target: string, answeredBy: string): void {
  if (ctx.ring !== null) ctx.ring.applyMoved(slot, target, answeredBy);
  else ctx.topology?.applyMoved(slot, target);
}

/** TRYAGAIN, CLUSTERDOWN or a lost node: every slot map in use is loaded again soon. */
export function refreshSlotMaps(ctx: ProxyContext): void {
  (ctx.ring ?? ctx.topology)?.requestRefresh();
}

/** The reply to ASKING is dropped; the command right behind it on the same connection carries on. */
const askingRequest: BackendRequest = { payload: ASKING, onReply: () => undefined, onFailure: () => undefined };

/** `-MOVED <slot> <host>:<port>` / `-ASK <slot> <host>:<port>`. */
export function isRedirect(frame: Buffer): boolean {
  return frame[0] === 45 && ((frame[1] === M && frame.toString('latin1', 1, 7) === 'MOVED ') || (frame[1] === A && frame.toString('latin1', 1, 5) === 'ASK '));
}

/** The slot and the node a MOVED/ASK from `answeredBy` names, or null when it names none. */
function redirectTarget(frame: Buffer, answeredBy: string): { slot: number; target: string } | null {
  const parts = frame.toString('latin1', 1, frame.length - 2).split(' ');
  const slot = Number(parts[1]);
  let target = parts[2] ?? '';
  // Redis 7 leaves the host out when it does not know its own: it means "the node you asked".
  if (target.startsWith(':')) target = splitAddress(answeredBy)[0] + target;
  return slot >= 0 && slot < 16384 && /:\d+$/.test(target) ? { slot, target } : null;
}

/** A MOVED met outside ForwardedCommand (a WATCH): the slot map learns the new owner. */
export function learnMoved(ctx: ProxyContext, frame: Buffer, answeredBy: string): void {
  const moved = redirectTarget(frame, answeredBy);
  if (moved !== null) noteMoved(ctx, moved.slot, moved.target, answeredBy);
}

/** An error reply that ForwardedCommand acts on itself (a redirect, or a retry) rather than passing on. */
export function isRedirectOrRetry(frame: Buffer): boolean {
  const b = frame[1];
  if (b === M) return frame.toString('latin1', 1, 7) === 'MOVED ';
  if (b === A) return frame.toString('latin1', 1, 5) === 'ASK ';
  if (b === T) return frame.toString('latin1', 1, 9) === 'TRYAGAIN';
  if (b === C) return frame.toString('latin1', 1, 12) === 'CLUSTERDOWN';
  return false;
}

export class ForwardedCommand extends ReplySlot implements BackendRequest {
  private hops = 0;
  private attempts = 0;
  private firstFailureAt = 0;
  /** readFrom replica: a replica was picked (or none was healthy) for this command. */
  private triedReplica = false;
  /** The command is on a replica now. */
  private onReplica = false;
  protected address = '';
  /** For the latency histogram (/metrics): from dispatch to the final reply, retries included. */
  private readonly startedAt = batchClock();

  constructor(
    protected readonly ctx: ProxyContext,
    owner: ReplyOwner,
    readonly payload: Buffer,
    private readonly shard: number,
    private readonly retrySafe: boolean,
  ) {
    super(owner);
  }

  /** Where the command of `shard` goes: where its reads go (a migration's read-new: side B). */
  protected nodeOf(shard: number): string | null {
    return this.ctx.router.nodeOf(shard);
  }

  /** The node the command went to last (after redirects). */
  get node(): string {
    return this.address;
  }

  start(): void {
    const address = this.shard === ANY_MASTER ? this.anyMaster() : this.nodeOf(this.shard);
    if (address === null) {
      // A slot map without the slot's owner (read mid-failover): read it again now, not at the next timed refresh.
      if (this.shard !== ANY_MASTER) refreshSlotMaps(this.ctx);
      this.retry(this.shard === ANY_MASTER ? errors.PROXY_NOT_READY : errors.SLOT_NOT_SERVED);
      return;
    }
    // readFrom replica: a read-only command goes to a healthy replica, once; any trouble there
    // (lost connection, LOADING, MASTERDOWN) sends it to the master instead.
    const replicas = this.ctx.replicaReads;
    if (replicas !== null && this.retrySafe && !this.triedReplica && this.shard !== ANY_MASTER && this.owner.readsMasterOnly !== true) {
      this.triedReplica = true;
      const replica = replicas.pick(address, this.owner.id);
      if (replica !== null) {
        this.onReplica = true;
        this.sendTo(replica);
        return;
      }
    }
    // Sentinel is promoting this master's replica: what the master acknowledges now would be lost.
    const sentinel = this.ctx.sentinel;
    if (!this.retrySafe && sentinel !== null && sentinel.holdsWrites(address)) return sentinel.retryAfter(address, PROMOTION_CHECK_MS, () => this.start());
    this.sendTo(address);
  }

  /**
   * Takes over a request another sender already wrote to `address` (a split part, split-part.ts):
   * the reply or failure it got is handed to onReply/onFailure, and everything after is as usual.
   */
  adopt(address: string): this {
    this.address = address;
    this.triedReplica = true;
    return this;
  }

  /** Leaves a replica that could not serve the read: the master gets it now. */
  private leaveReplica(): void {
    this.onReplica = false;
    this.ctx.replicaReads?.markDown(this.address);
    this.start();
  }

  onReply(frame: Buffer): void {
    if (frame[0] !== 45 /* - */) {
      this.complete(frame);
      return;
    }
    const b = frame[1];
    if (this.onReplica && (frame.toString('latin1', 1, 8) === 'LOADING' || frame.toString('latin1', 1, 11) === 'MASTERDOWN')) {
      return this.leaveReplica();
    }
    if (b === M && frame.toString('latin1', 1, 7) === 'MOVED ') return this.redirect(frame, false);
    if (b === A && frame.toString('latin1', 1, 5) === 'ASK ') return this.redirect(frame, true);
    if (b === T && frame.toString('latin1', 1, 9) === 'TRYAGAIN') return this.retry(frame);
    if (b === C && frame.toString('latin1', 1, 12) === 'CLUSTERDOWN') {
      refreshSlotMaps(this.ctx);
      return this.retry(frame);
    }
    // A Sentinel master demoted to a replica refused the write (nothing ran): wait for its successor.
    if (b === R && frame.toString('latin1', 1, 9) === 'READONLY' && this.ctx.sentinel?.waitWindowMs(this.address) != null) {
      this.ctx.sentinel.demoted(this.address);
      return this.retry(frame);
    }
    this.complete(frame);
  }

  override complete(frame: Buffer): void {
    if (this.reply !== null) return;
    this.ctx.stats.latency.observe(batchClock() - this.startedAt);
    if (frame[0] === 45 /* - */) this.ctx.stats.replyErrors++;
    super.complete(frame);
  }

  onFailure(message: string, written: boolean): void {
    this.ctx.stats.backendErrors++;
    if (this.onReplica) return this.leaveReplica();
    refreshSlotMaps(this.ctx);
    // A ring server with no Sentinel to wait for, refusing or resetting connections: its error at
    // once, as nutcracker answers (the next request tries it again).
    if ((written && !this.retrySafe) || (errors.isNodeUnreachable(message) && this.ctx.pool.failsFast(this.address))) {
      this.complete(encode.error(message));
      return;
    }
    this.retry(message);
  }

  private sendTo(address: string): void {
    this.address = address;
    this.ctx.pool.connection(address, this.owner.id, this.owner.protocol).send(this);
  }

  private anyMaster(): string | null {
    const masters = this.ctx.router.masters();
    return masters.length === 0 ? null : masters[this.owner.id % masters.length];
  }

  /** `-MOVED <slot> <host>:<port>` / `-ASK <slot> <host>:<port>`. */
  private redirect(frame: Buffer, ask: boolean): void {
    this.onReplica = false; // a replica's MOVED points at the master that serves the slot now
    if (++this.hops > this.ctx.forward.maxRedirects) {
      this.complete(encode.error(errors.tooManyRedirects(this.ctx.forward.maxRedirects)));
      return;
    }
    const redirected = redirectTarget(frame, this.address);
    if (redirected === null) {
      this.complete(frame);
      return;
    }
    const { slot, target } = redirected;
    if (ask) {
      this.ctx.stats.ask++;
      const conn = this.ctx.pool.connection(target, this.owner.id, this.owner.protocol);
      // Adjacent on one connection: nothing else can slip between ASKING and the command.
      conn.send(askingRequest);
      conn.send(this);
      this.address = target;
      return;
    }
    this.ctx.stats.moved++;
    noteMoved(this.ctx, slot, target, this.address);
    this.sendTo(target);
  }

  /**
   * Tries again after a backoff, while the retry window lasts; then answers with `last`. For a
   * Sentinel master's node the window is the failover wait, and a move of the master ends the pause.
   */
  private retry(last: Buffer | string): void {
    const now = Date.now();
    if (this.firstFailureAt === 0) this.firstFailureAt = now;
    const sentinel = this.ctx.sentinel;
    const failoverWait = sentinel?.waitWindowMs(this.address) ?? null;
    if (now - this.firstFailureAt >= (failoverWait ?? this.ctx.forward.retryWindowMs)) {
      const text = typeof last === 'string' ? last : last.toString('utf8', 1, last.length - 2);
      if (sentinel !== null && failoverWait !== null) this.complete(encode.error(sentinel.gaveUp(this.address, text)));
      else this.complete(typeof last === 'string' ? encode.error(last) : last);
      return;
    }
    this.ctx.stats.retries++;
    const delay = Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** this.attempts++);
    if (sentinel !== null && failoverWait !== null) sentinel.retryAfter(this.address, delay, () => this.start());
    else setTimeout(() => this.start(), delay);
  }
}
