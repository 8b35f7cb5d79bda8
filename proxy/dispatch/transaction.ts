/**
 * MULTI / EXEC / DISCARD / WATCH / UNWATCH through the proxy, all keys in one shard (a hash slot in
 * cluster mode, a node in ring mode), behaving as on a single Redis.
 *
 * - MULTI opens the transaction in the proxy; each command is checked as Redis would (unknown,
 *   arity, numkeys, and CROSSSLOT against the transaction's shard), answered QUEUED, and kept. Any
 *   error marks the transaction dirty: EXEC then answers EXECABORT and nothing is sent.
 * - EXEC sends SCRIPT LOAD for every EVALSHA the proxy knows, then MULTI, the commands and EXEC,
 *   in one burst on one connection: nothing of another client can run in between, and no EVALSHA
 *   inside the EXEC reply can be NOSCRIPT. Without WATCH that connection is the client's shared
 *   lane (the burst is atomic on it); with WATCH it is the dedicated connection the WATCH ran on.
 * - WATCH needs a connection of its own from WATCH to EXEC/DISCARD/UNWATCH (the node tracks watched
 *   keys per connection): a dedicated one, pinned only for that span and closed after. While it is
 *   pinned, the client's other commands on the same shard use it too, so a read after WATCH sees
 *   the node in WATCH order.
 * - A redirection met while queuing (MOVED, TRYAGAIN: the node answers EXECABORT) sends the whole
 *   unwatched transaction again, bounded; nothing of it ran.
 * - During a ring migration the transaction runs on ring A's node (where writes land), and the
 *   keys it writes that move are snapshotted inside the same MULTI, right before EXEC, then applied
 *   on their owners in ring B before the client gets EXEC's reply (proxy/migration/converging-exec.ts).
 *   A WATCH opened before a phase switch moved its keys' writes elsewhere makes EXEC answer nil,
 *   as a touched key would: the client retries on the new node.
 */
import { convergeExec, execTargets } from '../migration/converging-exec';
import { execElements, sendRaw } from '../migration/converging-write';
import { Merge } from './fanout';
import { everyNode as everyNodeOf } from './every-node';
import { noteTargetRefusal } from '../migration/target-refusals';
import { ClientSession } from '../client/client-session';
import { ProxyContext } from '../context';
import { CommandInfo } from '../commands/table';
import { keyPositions } from '../commands/keys';
import { Strategy } from '../commands/policy';
import { ReplySlot } from '../client/reply-slot';
import { BackendConnection } from '../backend/connection';
import { DedicatedLink, DirectCommand } from './dedicated';
import { ANY_MASTER, slotArgument } from './forward';
import { SCRIPT_CALLS, numkeysError, scriptLoadRequest } from './script-call';
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';

/** No key seen yet: the transaction is not bound to a shard. */
const UNBOUND = -2;
const QUEUED = encode.simple('QUEUED');
const MULTI = encode.command(['MULTI']);
const EXEC = encode.command(['EXEC']);
const UNWATCH = encode.command(['UNWATCH']);
const RETRY_DELAY_MS = 25;

/** Local commands that mean the same on a node inside MULTI. */
const NODE_ANSWERS_IN_MULTI = new Set(['ping', 'echo']);

export class Transaction {
  inMulti = false;
  dirty = false;
  shard = UNBOUND;
  queued: Buffer[] = [];
  shas: Buffer[] = [];
  /** Queued commands that reach several nodes (DBSIZE, FLUSHALL, CONFIG SET ...), by their index in `queued`. */
  spread = new Map<number, Spread>();
  /** Every key named so far (WATCH and queued commands), to find the shard again at EXEC. */
  keys: Buffer[] = [];
  /** The keys of queued commands that write (a migration copies them after EXEC). */
  written: Buffer[] = [];
  /**
   * A WATCH the cluster refused for a while (CLUSTERDOWN, TRYAGAIN): the client got OK, and EXEC
   * will answer nil without running anything, as when a watched key was touched.
   */
  doomed = false;
  /** The WATCH connection, from WATCH to EXEC/DISCARD/UNWATCH. */
  watch: DedicatedLink | null = null;

  /** True when a command on `shard` must use the WATCH connection. */
  pinnedTo(shard: number): boolean {
    return this.watch !== null && !this.doomed && shard === this.shard;
  }

  /** A command between WATCH and MULTI on the watched shard: on the WATCH connection, in order. */
  sendWatched(session: TransactionClient, payload: Buffer): void {
    this.watch?.conn.send(session.track(new DirectCommand(session, payload)));
  }

  release(): void {
    this.watch?.releaseAfterReplies();
    this.watch = null;
  }
}

/**
 * A command of the transaction that Redis would answer from one server but the proxy sends to
 * several nodes: it runs on the transaction's node inside MULTI, then on the other nodes right
 * after EXEC, and its place in EXEC's reply is the merge of all their replies, as outside a
 * transaction. Not atomic across nodes (a client of another node may see it half done).
 */
export interface Spread {
  /** How the replies merge into one (the merge the command has outside a transaction). */
  merge: Merge;
  /** Masters and replicas (CONFIG SET/RESETSTAT/REWRITE), or the masters alone. */
  everyNode: boolean;
}

/** A session as the transaction commands see it: its open MULTI/WATCH, null outside one. */
export interface TransactionClient extends ClientSession {
  transaction: Transaction | null;
}

/**
 * MULTI, EXEC, DISCARD, WATCH, UNWATCH. Returns a promise when the session's next requests must
 * wait for EXEC (a ring migration reading from ring B: they must see what it wrote).
 */
export function transactionCommand(ctx: ProxyContext, session: TransactionClient, info: CommandInfo, args: Buffer[]): Promise<void> | void {
  const txn = session.transaction;
  switch (info.name) {
    case 'multi':
      if (txn?.inMulti === true) return session.replyNow(encode.error(errors.MULTI_NESTED));
      (txn ?? begin(session)).inMulti = true;
      return session.replyNow(encode.OK);
    case 'discard':
      if (txn === null || !txn.inMulti) return session.replyNow(encode.error(errors.DISCARD_WITHOUT_MULTI));
      end(session, txn);
      return session.replyNow(encode.OK);
    case 'exec':
      if (txn === null || !txn.inMulti) return session.replyNow(encode.error(errors.EXEC_WITHOUT_MULTI));
      if (txn.dirty) {
        end(session, txn);
        return session.replyNow(encode.error(errors.EXECABORT));
      }
      session.transaction = null;
      return session.track(new ExecCommand(ctx, session, txn)).start();
    case 'watch':
      if (txn?.inMulti === true) return session.replyNow(encode.error(errors.WATCH_INSIDE_MULTI));
      return watch(ctx, session, info, args);
    case 'unwatch': {
      if (txn?.inMulti === true) {
        queue(session, txn, UNWATCH);
        return;
      }
      const link = txn?.watch ?? null;
      if (txn !== null) {
        txn.watch = null;
        end(session, txn);
      }
      if (link === null) return session.replyNow(encode.OK);
      // Answered by the node, then the connection goes (its watches with it).
      const slot = session.track(new DirectCommand(session, UNWATCH));
      return link.conn.send({
        payload: UNWATCH,
        onReply: (frame) => {
          link.release();
          slot.complete(frame);
        },
        onFailure: (message) => {
          link.release();
          slot.complete(encode.error(message));
        },
      });
    }
  }
}

/** A command sent while MULTI is open: checked, then kept for EXEC (or refused, dirtying the transaction). */
export function queueInTransaction(
  ctx: ProxyContext,
  session: TransactionClient,
  txn: Transaction,
  info: CommandInfo,
  strategy: Strategy | undefined,
  args: Buffer[],
  raw: Buffer | null,
  spread: Spread | null = null,
): Promise<void> | undefined {
  if (spread !== null) {
    txn.spread.set(txn.queued.length, spread);
    queue(session, txn, raw ?? encode.command(args));
    return undefined;
  }
  if (strategy !== undefined && !keylessInMulti(strategy, info.name)) {
    refuseQueued(session, txn, errors.unsupported(info.name, 'it cannot run inside a transaction through slotproxy'));
    return undefined;
  }
  const positions = strategy === undefined ? keyPositions(info, args) : [];
  if (positions !== null) {
    queueWithKeys(ctx, session, txn, info, strategy, args, raw, positions.map((p) => args[p]));
    return undefined;
  }
  // Keys only the node can find (SORT ... BY, STORE): asked as outside a transaction; the session
  // holds its next requests until this one is queued, so QUEUED replies keep their order.
  return keysFromNode(ctx, session.id, args).then((keys) => queueWithKeys(ctx, session, txn, info, strategy, args, raw, keys));
}

/** COMMAND GETKEYS on a master; [] when it cannot tell (the node then answers the command itself at EXEC). */
async function keysFromNode(ctx: ProxyContext, lane: number, args: Buffer[]): Promise<Buffer[]> {
  const masters = ctx.router.masters();
  if (masters.length === 0) return [];
  try {
    const reply = decodeReply(await request(ctx.pool.connection(masters[lane % masters.length], lane), ['COMMAND', 'GETKEYS', ...args]), true);
    return Array.isArray(reply) ? reply.filter((k): k is Buffer => Buffer.isBuffer(k)) : [];
  } catch {
    return [];
  }
}

function refuseQueued(session: TransactionClient, txn: Transaction, message: string): void {
  txn.dirty = true;
  session.replyNow(encode.error(message));
}

/** Checks a command whose keys are known against the transaction's shard, then queues it. */
function queueWithKeys(
  ctx: ProxyContext,
  session: TransactionClient,
  txn: Transaction,
  info: CommandInfo,
  strategy: Strategy | undefined,
  args: Buffer[],
  raw: Buffer | null,
  keys: readonly Buffer[],
): void {
  // CLUSTER COUNTKEYSINSLOT/GETKEYSINSLOT: the slot they name binds the transaction as a key's would.
  const named = strategy?.kind === 'slot' ? slotArgument(args[2]) : ANY_MASTER;
  const script = SCRIPT_CALLS.get(info.name);
  if (keys.length === 0 && (script === 'eval' || script === 'evalsha')) {
    const bad = numkeysError(args);
    if (bad !== null) return refuseQueued(session, txn, bad);
  }
  for (let i = named === ANY_MASTER ? 0 : -1; i < keys.length; i++) {
    const shard = i < 0 ? named : ctx.router.shardOf(keys[i]);
    const bound = boundShard(ctx, txn);
    if (bound === UNBOUND) txn.shard = shard;
    else if (shard !== bound) {
      ctx.stats.crossSlotErrors++;
      if (i >= 0) noteTargetRefusal(ctx, info.name, [txn.keys[0] ?? keys[0], keys[i]]);
      return refuseQueued(session, txn, errors.CROSSSLOT);
    }
  }
  txn.keys.push(...keys);
  if (!info.flags.has('readonly')) txn.written.push(...keys);
  if (script === 'eval') ctx.scripts.add(args[1]);
  else if (script === 'evalsha') txn.shas.push(args[1]);
  queue(session, txn, raw ?? encode.command(args));
}

/** Keyless commands a node can run inside the transaction; other special ones are refused there. */
function keylessInMulti(strategy: Strategy, name: string): boolean {
  switch (strategy.kind) {
    case 'any-master':
    case 'slot':
    case 'wait':
      return true;
    case 'local':
      return NODE_ANSWERS_IN_MULTI.has(name);
    case 'pubsub':
      return name === 'publish' || name.startsWith('pubsub|');
    default:
      return false;
  }
}

function queue(session: TransactionClient, txn: Transaction, payload: Buffer): void {
  txn.queued.push(payload);
  session.replyNow(QUEUED);
}

function begin(session: TransactionClient): Transaction {
  const txn = new Transaction();
  session.transaction = txn;
  return txn;
}

/** RESET: the transaction and its WATCH are dropped. */
export function discardTransaction(session: TransactionClient, txn: Transaction): void {
  end(session, txn);
}

function end(session: TransactionClient, txn: Transaction): void {
  txn.release();
  if (session.transaction === txn) session.transaction = null;
}

function watch(ctx: ProxyContext, session: TransactionClient, info: CommandInfo, args: Buffer[]): void {
  const positions = keyPositions(info, args) ?? [];
  let shard = session.transaction === null ? UNBOUND : boundShard(ctx, session.transaction);
  for (const p of positions) {
    const s = ctx.router.shardOf(args[p]);
    if (shard === UNBOUND) shard = s;
    else if (s !== shard) {
      ctx.stats.crossSlotErrors++;
      return session.replyNow(encode.error(errors.CROSSSLOT));
    }
  }
  const txn = session.transaction ?? begin(session);
  for (const p of positions) txn.keys.push(args[p]);
  let link = txn.watch;
  if (link === null) {
    const address = writeNodeOf(ctx, shard);
    if (address === null) {
      end(session, txn);
      return session.replyNow(encode.error(errors.SLOT_NOT_SERVED));
    }
    link = new DedicatedLink(address, ctx.pool.dedicated(address, 0, session.protocol), session.dedicated);
    txn.watch = link;
  }
  txn.shard = shard;
  const reply = session.track(new DirectCommand(session, encode.command(args)));
  const watched = positions.map((p) => args[p]);
  // A WATCH the node refused (CLUSTERDOWN, a lost node) watches nothing: its keys no longer bind the transaction.
  const refused = (): void => {
    txn.keys = txn.keys.filter((k) => !watched.includes(k));
    if (txn.keys.length === 0 && !txn.inMulti && session.transaction === txn) end(session, txn);
  };
  link.conn.send({
    payload: reply.payload,
    onReply: (frame) => {
      if (isClusterDown(frame)) {
        // Nothing is watched, and the client's retry loop expects a failed EXEC, not an error here.
        txn.doomed = true;
        return reply.onReply(encode.OK);
      }
      if (frame[0] === 45) refused();
      reply.onReply(frame);
    },
    onFailure: (message) => {
      refused();
      reply.onFailure(message);
    },
  });
}

function isExecAbort(frame: Buffer): boolean {
  return frame[0] === 45 && frame.toString('latin1', 1, 10) === 'EXECABORT';
}

/** EXEC answered CLUSTERDOWN or TRYAGAIN: the node ran nothing of the transaction. */
function isClusterDown(frame: Buffer): boolean {
  return frame[0] === 45 && (frame.toString('latin1', 1, 12) === 'CLUSTERDOWN' || frame.toString('latin1', 1, 9) === 'TRYAGAIN');
}

/** Where the writes of `shard` go: ring A's node during a migration, else the shard's node. */
function writeNodeOf(ctx: ProxyContext, shard: number): string | null {
  return ctx.ring !== null ? ctx.ring.placement.writeAddress(shard) : ctx.router.nodeOf(shard);
}

/**
 * The shard the transaction is bound to, under the current placement: in ring mode a phase switch
 * renumbers shards, so it is found again from the first key (still one node in both rings).
 */
function boundShard(ctx: ProxyContext, txn: Transaction): number {
  if (ctx.ring === null || txn.keys.length === 0) return txn.shard;
  return ctx.router.shardOf(txn.keys[0]);
}

/** The transaction's shard under the current placement (a phase switch renumbers ring shards). */
function currentShard(ctx: ProxyContext, txn: Transaction): number | null {
  if (ctx.ring === null || txn.keys.length === 0) return txn.shard;
  const shard = ctx.router.shardOf(txn.keys[0]);
  for (let i = 1; i < txn.keys.length; i++) if (ctx.router.shardOf(txn.keys[i]) !== shard) return null;
  return shard;
}

/** EXEC: the queued commands sent as one burst, the node's EXEC reply forwarded. */
class ExecCommand extends ReplySlot {
  private attempts = 0;
  private settle: () => void = () => undefined;
  /** Settles once the client's reply is known. */
  private readonly settled = new Promise<void>((resolve) => (this.settle = resolve));

  constructor(private readonly ctx: ProxyContext, private readonly session: TransactionClient, private readonly txn: Transaction) {
    super(session);
  }

  /** Returns a promise when the session's next requests must wait for this EXEC. */
  start(): Promise<void> | undefined {
    const { ctx, txn } = this;
    const link = txn.watch;
    if (txn.doomed) {
      this.finish(this.notRun());
      return undefined;
    }
    const shard = currentShard(ctx, txn);
    if (shard === null) {
      this.finish(encode.error(errors.execAbort(errors.CROSSSLOT)));
      return undefined;
    }
    let address: string | null;
    if (shard !== UNBOUND) address = writeNodeOf(ctx, shard);
    else if (link !== null) address = link.address;
    else {
      const masters = ctx.router.masters();
      address = masters.length === 0 ? null : masters[this.session.id % masters.length];
    }
    if (address === null) {
      this.finish(encode.error(errors.SLOT_NOT_SERVED));
      return undefined;
    }
    if (link !== null && ctx.ring !== null && link.address !== address) {
      // A phase switch moved where these keys are written since WATCH: what was watched no longer
      // guards them, so the transaction fails as when a watched key was touched.
      this.finish(this.session.protocol === 3 ? encode.RESP3_NULL : encode.NULL_ARRAY);
      return undefined;
    }
    const conn = link?.conn ?? ctx.pool.connection(address, this.session.id, this.session.protocol);
    const targets = execTargets(ctx, txn.written);
    if (targets.length > 0) {
      let redirected = false;
      const note = (c: BackendConnection) => (frame: Buffer): void => {
        if (this.noteRedirect(frame, c)) redirected = true;
      };
      const burst = { conn, address, sendQueued: (c: BackendConnection) => this.sendQueued(c, note(c)), queuedCount: txn.queued.length, watched: link !== null };
      convergeExec(ctx, this.session, burst, targets, (frame) => {
        // A cluster side A redirected a queued command: nothing ran, send it all again (bounded).
        if (((redirected && isExecAbort(frame)) || isClusterDown(frame)) && link === null && this.attempts++ < ctx.forward.maxRedirects + 3) {
          setTimeout(() => this.start(), RETRY_DELAY_MS * this.attempts);
          return;
        }
        this.finishExec(link !== null && isClusterDown(frame) ? this.notRun() : frame, address);
      });
      return this.hold();
    }
    this.send(conn, address, link === null);
    return undefined;
  }

  /** In a ring migration reading from ring B, the session's next requests wait for EXEC's copy there. */
  private hold(): Promise<void> | undefined {
    this.ctx.ring?.track(this.settled);
    return this.ctx.ring?.placement.phase === 'read-new' ? this.settled : undefined;
  }

  /** SCRIPT LOADs, MULTI and the queued commands on `conn`, EXEC not included; `onQueued` sees each queue-time reply. */
  private sendQueued(conn: BackendConnection, onQueued: (frame: Buffer) => void = () => undefined): void {
    for (const sha of this.txn.shas) {
      const body = this.ctx.scripts.get(sha);
      if (body !== undefined) conn.send(scriptLoadRequest(body));
    }
    conn.send({ payload: MULTI, onReply: onQueued, onFailure: () => undefined });
    for (const payload of this.txn.queued) conn.send({ payload, onReply: onQueued, onFailure: () => undefined });
  }

  /** True when a queue-time reply is a redirection (the slot map learns a MOVED, a refresh is asked for the rest). */
  private noteRedirect(frame: Buffer, conn: BackendConnection): boolean {
    const ctx = this.ctx;
    if (frame[0] !== 45) return false;
    const text = frame.toString('latin1', 1, Math.min(frame.length, 40));
    if (text.startsWith('MOVED ')) {
      const [, slot, target] = frame.toString('latin1', 1, frame.length - 2).split(' ');
      (ctx.ring ?? ctx.topology)?.applyMoved(Number(slot), target, conn.address);
      return true;
    }
    if (text.startsWith('TRYAGAIN') || text.startsWith('CLUSTERDOWN') || text.startsWith('ASK ')) {
      (ctx.ring ?? ctx.topology)?.requestRefresh();
      return true;
    }
    return false;
  }

  private send(conn: BackendConnection, address: string, retryable: boolean): void {
    const { ctx } = this;
    let redirected = false;
    this.sendQueued(conn, (frame) => {
      if (this.noteRedirect(frame, conn)) redirected = true;
    });
    conn.send({
      payload: EXEC,
      onReply: (frame) => {
        if (((isExecAbort(frame) && redirected) || isClusterDown(frame)) && retryable && this.attempts++ < ctx.forward.maxRedirects + 3) {
          setTimeout(() => this.start(), RETRY_DELAY_MS * this.attempts);
          return;
        }
        this.finishExec(!retryable && isClusterDown(frame) ? this.notRun() : frame, address);
      },
      onFailure: (message) => this.finish(encode.error(message)),
    });
  }

  /**
   * A WATCHed EXEC the cluster refused (CLUSTERDOWN, TRYAGAIN) ran nothing, and its watches cannot
   * be carried to a new connection: it answers nil, as when a watched key was touched, and the
   * client's retry starts over with a new WATCH.
   */
  private notRun(): Buffer {
    return this.session.protocol === 3 ? encode.RESP3_NULL : encode.NULL_ARRAY;
  }

  /** EXEC's reply from the transaction's node at `address`; commands that reach several nodes run on the others now. */
  private finishExec(frame: Buffer, address: string): void {
    const spread = this.txn.spread;
    const elements = spread.size === 0 ? null : execElements(frame);
    if (elements === null || elements.length !== this.txn.queued.length) return this.finish(frame);
    const others = (everyNode: boolean): string[] => (everyNode ? everyNodeOf(this.ctx) : [...this.ctx.router.masters()]).filter((a) => a !== address);
    const merged = [...spread].map(async ([index, { merge, everyNode }]) => {
      const frames = await Promise.all(
        others(everyNode).map((a) => sendRaw(this.ctx.pool.connection(a, this.session.id), this.txn.queued[index]).catch((err: Error) => encode.error(err.message))),
      );
      try {
        elements[index] = merge([elements[index], ...frames]);
      } catch (err) {
        elements[index] = encode.error(`ERR slotproxy: cannot merge replies: ${(err as Error).message}`);
      }
    });
    void Promise.all(merged).then(() => this.finish(encode.arrayOfFrames(elements)));
  }

  private finish(frame: Buffer): void {
    this.txn.release();
    this.complete(frame);
    this.settle();
  }
}
