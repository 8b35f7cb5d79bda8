/**
 * Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN/MAX, BLMPOP, BZMPOP, XREAD and
 * XREADGROUP with BLOCK) and WAIT, each on a dedicated back-end connection: a blocked command on a
 * shared lane would stall every client behind it. The connection is opened for the command, has
 * no command timeout (the block is the command's own), and is closed when the reply arrives or
 * when the client disconnects (the session releases what it holds), so the node drops the block.
 *
 * The client's later requests are held until the reply comes, as a single Redis does not read a
 * blocked client's next commands: a pipelined `BLPOP q 0` + `LPUSH q x` must not unblock itself.
 *
 * It reaches its node before anything another client sends after it, as on one server (a FLUSHALL
 * sent right after an XREADGROUP ... BLOCK unblocks it rather than running first): until the node
 * has read it (the CLIENT ID written with it answered), what the proxy's shared connections to that
 * node write waits (BackendPool.holdWrites), at most ORDER_WAIT_MS (a node slow to accept a
 * connection does not hold the others longer). Other nodes' traffic does not wait.
 *
 * CLIENT UNBLOCK of a proxy client is passed on as CLIENT UNBLOCK of the dedicated connection on
 * its node (whose id a `CLIENT ID` written just before the command tells), so the node ends the
 * block itself and nothing it popped is lost.
 *
 * In ring mode a phase switch of a migration may move where the command belongs (a BLPOP blocked
 * on ring A when writes go to ring B from `done` on): the proxy unblocks it the same way and, when
 * the node answers with the timeout's null (nothing popped), sends it again where it now belongs.
 * When the node had popped something first, that reply is the client's as usual. The client's
 * timeout starts again on the new node.
 */
import { ClientSession, Releasable, Unblockable } from '../client/client-session';
import { request } from '../backend/request';
import { ProxyContext } from '../context';
import { ReplySlot } from '../client/reply-slot';
import { BackendConnection, BackendRequest } from '../backend/connection';
import { DedicatedLink } from './dedicated';
import { ANY_MASTER, PROMOTION_CHECK_MS, noteMoved, refreshSlotMaps } from './forward';
import { decodeReply, isNullReply } from '../resp/decode-reply';
import { BlockingRoute } from '../migration/converging-block';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';

/**
 * Sends a blocking command on a connection of its own; resolves once it has its reply. `route`
 * (ring mode) says where it blocks and what follows its reply, asked again at every (re)start.
 */
export function runBlocking(ctx: ProxyContext, session: ClientSession, payload: Buffer, shard: number, route?: () => BlockingRoute): Promise<void> {
  const cmd = session.track(new BlockingCommand(ctx, session, payload, shard, route ?? null));
  cmd.start();
  return cmd.done;
}

const RETRY_DELAY_MS = 100;
const CLIENT_ID = encode.command(['CLIENT', 'ID']);
const ORDER_WAIT_MS = 250;

/**
 * Holds the shared connections to `address` until the returned function is called (the blocking
 * command got there) or ORDER_WAIT_MS passed; calling it again does nothing.
 */
function onTheWay(ctx: ProxyContext, address: string): () => void {
  const release = ctx.pool.holdWrites(address);
  const timer = setTimeout(release, ORDER_WAIT_MS);
  return () => {
    clearTimeout(timer);
    release();
  };
}

/**
 * Held in the session's `dedicated` set from start to reply, so a client that goes away closes the
 * connection the command blocks on (and cancels a retry waiting to happen).
 */
class BlockingCommand extends ReplySlot implements BackendRequest, Releasable, Unblockable {
  readonly done: Promise<void>;
  private resolveDone: () => void = () => undefined;
  private conn: BackendConnection | null = null;
  private hops = 0;
  private firstFailureAt = 0;
  private released = false;
  /** The node's id for the dedicated connection, once its CLIENT ID answered. */
  private nodeClientId: string | null = null;
  private address: string | null = null;
  /** What follows the reply under the route of the current start (a migration's copy to ring B). */
  private settle: BlockingRoute['settle'] | null = null;
  private routeIdentity = '';
  /** Set while the proxy unblocks the command to send it again elsewhere. */
  private rehoming = false;
  private forgetBlocked: (() => void) | null = null;
  /** Set from the first start until the node has read the command: what other clients send to that node waits. */
  private arrived: (() => void) | null = null;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly session: ClientSession,
    readonly payload: Buffer,
    private readonly shard: number,
    private readonly route: (() => BlockingRoute) | null,
  ) {
    super(session);
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    session.dedicated.add(this);
    if (route !== null) this.forgetBlocked = ctx.ring?.holdBlocked(this) ?? null;
  }

  /** A phase switch: when the command now belongs elsewhere, unblock it here (onReply sends it again). */
  rehome(): void {
    if (this.route === null || this.rehoming || this.reply !== null) return;
    if (this.route().identity === this.routeIdentity) return;
    this.rehoming = true;
    void this.unblock('timeout').then((ended) => {
      // Not blocked yet (its CLIENT ID not answered): it runs where it was sent; or it already answered.
      if (!ended) this.rehoming = false;
    });
  }

  start(target?: string): void {
    if (this.released) return;
    let address = target ?? null;
    if (address === null && this.route !== null) {
      const route = this.route();
      address = route.address;
      this.settle = route.settle ?? null;
      this.routeIdentity = route.identity;
    } else if (address === null) {
      const masters = this.ctx.router.masters();
      address = this.shard === ANY_MASTER ? (masters[this.session.id % Math.max(1, masters.length)] ?? null) : this.ctx.router.nodeOf(this.shard);
    }
    if (address === null) return this.complete(encode.error(this.shard === ANY_MASTER ? errors.PROXY_NOT_READY : errors.SLOT_NOT_SERVED));
    // Sentinel is promoting this master's replica: a pop the master made now would be dropped when
    // it is made a replica; the command waits for the move, as a plain write does.
    const sentinel = this.ctx.sentinel;
    if (sentinel !== null && sentinel.holdsWrites(address)) {
      return sentinel.retryAfter(address, PROMOTION_CHECK_MS, () => this.start(target === undefined ? undefined : (sentinel.masterNow(target) ?? target)));
    }
    // Once: a retry or a move is not ordered again.
    this.arrived ??= onTheWay(this.ctx, address);
    this.conn = this.ctx.pool.dedicated(address, 0, this.session.protocol);
    this.address = address;
    this.nodeClientId = null;
    this.conn.send({
      payload: CLIENT_ID,
      onReply: (frame) => {
        if (frame[0] !== 58 || this.reply !== null) return;
        // The command was in the same write, so the node has read it: the client is blocked now.
        this.nodeClientId = frame.toString('latin1', 1, frame.length - 2);
        this.session.blocked = this;
        this.reachedNode();
      },
      onFailure: () => this.reachedNode(), // the command behind it fails the same way and says so
    });
    this.conn.send(this);
  }

  /** CLIENT UNBLOCK: asks the node to end the block; the command's own reply then comes as usual. */
  async unblock(reason: 'timeout' | 'error'): Promise<boolean> {
    const id = this.nodeClientId;
    const address = this.address;
    if (id === null || address === null || this.reply !== null) return false;
    try {
      const frame = await request(this.ctx.pool.connection(address, this.session.id), ['CLIENT', 'UNBLOCK', id, reason.toUpperCase()]);
      return frame.toString('latin1') === ':1\r\n';
    } catch {
      return false;
    }
  }

  /** The client went away: drop the connection, and with it the block on the node. */
  release(): void {
    this.released = true;
    this.closeConnection();
    this.complete(encode.error(errors.connectionLost('client')));
  }

  onReply(frame: Buffer): void {
    // MOVED: the slot moved before the command blocked; follow it (bounded), nothing ran.
    if (frame[0] === 45 && frame.toString('latin1', 1, 7) === 'MOVED ' && this.hops++ < this.ctx.forward.maxRedirects) {
      const [, slot, target] = frame.toString('latin1', 1, frame.length - 2).split(' ');
      this.ctx.stats.moved++;
      noteMoved(this.ctx, Number(slot), target, this.address ?? '');
      this.closeConnection();
      return this.start(target);
    }
    // The node took nothing (CLUSTERDOWN, TRYAGAIN, or a master turned replica by a failover, which
    // unblocks its blocked clients): send it again, to the new owner, while the retry window lasts.
    if (frame[0] === 45 && tookNothing(frame) && this.retryLater()) return;
    if (this.rehoming) {
      this.rehoming = false;
      if (isNullReply(frame)) {
        this.closeConnection();
        return this.start();
      }
    }
    const settle = this.settle;
    if (settle != null && frame[0] !== 45 && !isNullReply(frame)) {
      void settle(frame).then((reply) => {
        if (Buffer.isBuffer(reply)) return this.complete(reply);
        // Ring B was fenced before the pop reached it: B alone counts now, and answers.
        this.closeConnection();
        this.settle = null;
        this.routeIdentity = reply.rerunOn;
        this.start(reply.rerunOn);
      });
      return;
    }
    this.complete(frame);
  }

  onFailure(message: string, written: boolean): void {
    // Never sent (the node is down, a failover under way): try again while the retry window lasts;
    // but a ring server with no Sentinel that refuses connections answers at once, as nutcracker.
    const failsFast = errors.isNodeUnreachable(message) && this.ctx.pool.failsFast(this.address ?? '');
    if (!written && !failsFast && this.retryLater()) return;
    this.complete(encode.error(message));
  }

  /** Sends the command again after a pause, while the retry window lasts; false once it is spent. */
  private retryLater(): boolean {
    const now = Date.now();
    if (this.firstFailureAt === 0) this.firstFailureAt = now;
    // A Sentinel master's node: as long as a failover may take (ring.sentinel.failoverWaitMs).
    const window = this.ctx.sentinel?.waitWindowMs(this.address ?? '') ?? this.ctx.forward.retryWindowMs;
    if (this.released || now - this.firstFailureAt >= window) return false;
    this.ctx.stats.retries++;
    refreshSlotMaps(this.ctx);
    this.closeConnection();
    setTimeout(() => this.start(), RETRY_DELAY_MS);
    return true;
  }

  override complete(frame: Buffer): void {
    if (this.reply !== null) return;
    this.reachedNode();
    this.forgetBlocked?.();
    this.session.dedicated.delete(this);
    if (this.session.blocked === this) this.session.blocked = null;
    this.closeConnection();
    super.complete(frame);
    this.resolveDone();
  }

  private reachedNode(): void {
    this.arrived?.();
  }

  private closeConnection(): void {
    const conn = this.conn;
    this.conn = null;
    conn?.close('blocking command done');
  }
}

const STATE_CHANGED = 'UNBLOCKED force unblock from blocking operation, instance state changed';

function tookNothing(frame: Buffer): boolean {
  const head = frame.toString('latin1', 1, 1 + STATE_CHANGED.length);
  return head.startsWith('CLUSTERDOWN') || head.startsWith('TRYAGAIN') || head === STATE_CHANGED;
}

/**
 * WAIT numreplicas timeout: on a dedicated connection to every master (WAIT blocks its connection),
 * answered with the smallest count. A fresh connection has written nothing, so each master counts
 * the replicas in sync with it, which bounds what reached the replicas of the client's writes.
 * WAITAOF numlocal numreplicas timeout (Redis 7.2) the same way: its two counts, each the smallest.
 */
/** WAIT's count, or WAITAOF's pair of counts, each the smallest of the masters'. */
function smallest(replies: unknown[]): Buffer {
  if (!Array.isArray(replies[0])) return encode.integer(Math.min(...replies.map(Number)));
  const pairs = replies as unknown[][];
  return encode.arrayOfFrames(pairs[0].map((_, i) => encode.integer(Math.min(...pairs.map((p) => Number(p[i]))))));
}

export function runWait(ctx: ProxyContext, session: ClientSession, payload: Buffer): Promise<void> {
  const masters = ctx.router.masters();
  const slot = session.track(new ReplySlot(session));
  if (masters.length === 0) {
    slot.complete(encode.error(errors.PROXY_NOT_READY));
    return Promise.resolve();
  }
  const links = masters.map((m) => new DedicatedLink(m, ctx.pool.dedicated(m, 0, session.protocol), session.dedicated));
  ctx.stats.waitingClients++;
  return new Promise<void>((resolve) => {
    const frames: Buffer[] = [];
    const collect = (frame: Buffer): void => {
      frames.push(frame);
      if (frames.length < links.length) return;
      ctx.stats.waitingClients--;
      for (const l of links) l.release();
      const err = frames.find((f) => f[0] === 45);
      slot.complete(err ?? smallest(frames.map((f) => decodeReply(f))));
      resolve();
    };
    for (const l of links) l.conn.send({ payload, onReply: collect, onFailure: (message) => collect(encode.error(message)) });
  });
}
