/**
 * MULTI / EXEC / DISCARD / WATCH / UNWATCH through the proxy, all keys in one shard (a hash slot in
 * cluster mode, a node in ring mode), behaving as on a single Redis.
 *
 * - MULTI opens the transaction in the proxy; each command is checked as Redis would (unknown,
 *   arity, numkeys, and CROSSSLOT among its own keys), answered QUEUED, and kept. Any error marks
 *   the transaction dirty: EXEC then answers EXECABORT and nothing is sent.
 * - A command whose keys are in another shard than the transaction's is QUEUED, and EXEC is then
 *   refused with CROSSSLOT, nothing sent, as a Redis Cluster node checks every queued command's
 *   keys at EXEC (a single-node cluster; a node of several answers MOVED at queue time for a slot
 *   it does not own). A transaction also dirty answers EXECABORT, as Redis does.
 * - EXEC (exec.ts) sends SCRIPT LOAD for every EVALSHA the proxy knows, then MULTI, the commands and EXEC,
 *   in one burst on one connection: nothing of another client can run in between, and no EVALSHA
 *   inside the EXEC reply can be NOSCRIPT. Without WATCH that connection is the client's shared
 *   lane (the burst is atomic on it); with WATCH it is the dedicated connection the WATCH ran on.
 * - WATCH needs a connection of its own from WATCH to EXEC/DISCARD/UNWATCH (the node tracks watched
 *   keys per connection): a dedicated one, pinned only for that span and closed after. While it is
 *   pinned, the client's other commands on the same shard use it too, so a read after WATCH sees
 *   the node in WATCH order.
 * - A redirection met while queuing (MOVED, TRYAGAIN: the node answers EXECABORT) sends the whole
 *   unwatched transaction again, bounded; nothing of it ran.
 * - While the transaction's node runs a script past its busy threshold, a command queued gets the
 *   node's BUSY (the transaction is dirty), and EXEC then answers EXECABORT naming that BUSY while
 *   the node is still busy, as one Redis does (busyNodeReply).
 * - During a ring migration the transaction runs on ring A's node (where writes land), and the
 *   keys it writes that move are snapshotted inside the same MULTI, right before EXEC, then applied
 *   on their owners in ring B before the client gets EXEC's reply (proxy/migration/converging-exec.ts).
 *   A WATCH opened before a phase switch moved its keys' writes elsewhere makes EXEC answer nil,
 *   as a touched key would: the client retries on the new node.
 */
import { configSetInMultiRefusal } from './config-set';
import { noteTargetRefusal } from '../migration/target-refusals';
import { ProxyContext } from '../context';
import { CommandInfo } from '../commands/table';
import { keyPositions } from '../commands/keys';
import { Strategy } from '../commands/policy';
import { DedicatedLink, DirectCommand } from './dedicated';
import { ANY_MASTER, isRedirect, learnMoved, slotArgument } from './forward';
import { SCRIPT_CALLS, numkeysError } from './script-call';
import { writesUndeclared } from '../migration/after-copy';
import { ExecCommand, isClusterDown } from './exec';
import { FailoverWait } from './failover-wait';
import { Spread, Transaction, TransactionClient, UNBOUND, boundShard, writeNodeOf } from './transaction-state';
import { request } from '../backend/request';
import { ReplySlot } from '../client/reply-slot';
import { decodeReply } from '../resp/decode-reply';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { versionAtLeast } from '../resp/backend-version';

export type { Spread, Transaction, TransactionClient } from './transaction-state';

const QUEUED = encode.simple('QUEUED');
const UNWATCH = encode.command(['UNWATCH']);

/** Local commands that mean the same on a node inside MULTI. */
const NODE_ANSWERS_IN_MULTI = new Set(['ping', 'echo']);

/**
 * MULTI, EXEC, DISCARD, WATCH, UNWATCH. Returns a promise when the session's next requests must
 * wait for EXEC (a ring migration reading from ring B: they must see what it wrote).
 */
export function transactionCommand(ctx: ProxyContext, session: TransactionClient, info: CommandInfo, args: Buffer[]): Promise<void> | undefined {
  const txn = session.transaction;
  switch (info.name) {
    case 'multi':
      if (txn?.inMulti === true) return refuseInMulti(ctx, session, txn, errors.MULTI_NESTED);
      (txn ?? begin(session)).inMulti = true;
      return reply(session, encode.OK);
    case 'discard':
      if (txn === null || !txn.inMulti) return reply(session, encode.error(errors.DISCARD_WITHOUT_MULTI));
      end(session, txn);
      return reply(session, encode.OK);
    case 'exec':
      if (txn === null || !txn.inMulti) return reply(session, encode.error(errors.EXEC_WITHOUT_MULTI));
      if (txn.dirty) {
        // While its node is still busy one Redis names the BUSY error, else "previous errors".
        const busy = busyNodeReply(ctx, txn, session.id);
        end(session, txn);
        if (busy === null) return reply(session, encode.error(errors.EXECABORT));
        const slot = session.track(new ReplySlot(session));
        void busy.then((frame) => slot.complete(encode.error(frame === null ? errors.EXECABORT : errors.execAbort(frame.toString('latin1', 1, frame.length - 2)))));
        return undefined;
      }
      if (txn.crossSlot) {
        ctx.stats.crossSlotErrors++;
        end(session, txn);
        return reply(session, encode.error(errors.CROSSSLOT));
      }
      session.transaction = null;
      return session.track(new ExecCommand(ctx, session, txn)).start();
    case 'watch':
      if (txn?.inMulti === true) return refuseInMulti(ctx, session, txn, errors.WATCH_INSIDE_MULTI);
      watch(ctx, session, info, args);
      return undefined;
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
      if (link === null) return reply(session, encode.OK);
      // Answered by the node, then the connection goes (its watches with it).
      const slot = session.track(new DirectCommand(session, UNWATCH));
      link.conn.send({
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
      return undefined;
    }
  }
  return undefined;
}

/** Answers now; nothing for the session to wait for. */
function reply(session: TransactionClient, frame: Buffer): undefined {
  session.replyNow(frame);
  return undefined;
}

/**
 * MULTI or WATCH inside MULTI: Redis answers its own text and the transaction goes on; Valkey 8
 * refuses them as it refuses any command flagged no-multi there, and its EXEC then answers EXECABORT.
 */
function refuseInMulti(ctx: ProxyContext, session: TransactionClient, txn: Transaction, redisText: string): undefined {
  if (ctx.backendServer.name === 'valkey' && versionAtLeast(ctx.backendServer.version, 8, 0)) return refuseQueued(session, txn, errors.NOT_ALLOWED_IN_MULTI);
  return reply(session, encode.error(redisText));
}

/**
 * A (P|S)(UN)SUBSCRIBE sent while MULTI is open: QUEUED, run by the proxy at EXEC (`run`). Refused
 * when a WATCH may make EXEC run nothing: the proxy runs it when EXEC is sent.
 */
export function queueSubscription(session: TransactionClient, txn: Transaction, name: string, run: () => void): undefined {
  if (txn.watch !== null) return refuseQueued(session, txn, errors.unsupported(name, 'it cannot run inside a transaction with WATCH through slotproxy'));
  txn.subscriptions.push({ at: txn.queued.length + txn.subscriptions.length, run });
  session.replyNow(QUEUED);
  return undefined;
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
    const refusal = info.name === 'config|set' ? configSetInMultiRefusal(args) : null;
    if (refusal !== null) return refuseQueued(session, txn, refusal);
    txn.spread.set(txn.queued.length, spread);
    queue(session, txn, raw ?? encode.command(args));
    return undefined;
  }
  if (strategy !== undefined && !keylessInMulti(strategy, info.name)) {
    refuseQueued(session, txn, errors.unsupported(info.name, 'it cannot run inside a transaction through slotproxy'));
    return undefined;
  }
  /** Checks the command's keys against the transaction's shard, then queues it (or refuses it: its node is busy). */
  const queueWithKeys = (keys: readonly Buffer[]): Promise<void> | undefined => {
    // CLUSTER COUNTKEYSINSLOT/GETKEYSINSLOT: the slot they name binds the transaction as a key's would.
    const named = strategy?.kind === 'slot' ? slotArgument(args[2]) : ANY_MASTER;
    const script = SCRIPT_CALLS.get(info.name);
    if (keys.length === 0 && (script === 'eval' || script === 'evalsha')) {
      const bad = numkeysError(args);
      if (bad !== null) return refuseQueued(session, txn, bad);
    }
    // The command's own keys in one shard (else CROSSSLOT now), then that shard against the transaction's (else CROSSSLOT at EXEC).
    let own = UNBOUND;
    for (let i = named === ANY_MASTER ? 0 : -1; i < keys.length; i++) {
      const shard = i < 0 ? named : ctx.router.shardOf(keys[i]);
      if (own === UNBOUND) own = shard;
      else if (shard !== own) {
        ctx.stats.crossSlotErrors++;
        if (named === ANY_MASTER) noteTargetRefusal(ctx, info.name, [keys[0], keys[i]]);
        return refuseQueued(session, txn, errors.CROSSSLOT);
      }
    }
    if (own !== UNBOUND) {
      const bound = boundShard(ctx, txn);
      if (bound === UNBOUND) txn.shard = own;
      else if (own !== bound && !txn.crossSlot) {
        txn.crossSlot = true;
        if (keys.length > 0) noteTargetRefusal(ctx, info.name, [txn.keys[0] ?? keys[0], keys[0]]);
      }
    }
    const accept = (): void => {
      txn.keys.push(...keys);
      if (!info.flags.has('readonly')) txn.written.push(...keys);
      if (writesUndeclared(info.name)) txn.writesUndeclared = true;
      if (info.name === 'publish' || info.name === 'pubsub|channels' || info.name === 'pubsub|numsub' || info.name === 'pubsub|numpat') txn.asksHome = true;
      if (script === 'eval') ctx.scripts.add(args[1]);
      else if (script === 'evalsha') txn.shas.push(args[1]);
      queue(session, txn, raw ?? encode.command(args));
    };
    const busy = busyNodeReply(ctx, txn, session.id);
    if (busy === null) {
      accept();
      return undefined;
    }
    // The session holds its next requests until this one is answered, so replies keep their order.
    return busy.then((frame) => {
      if (frame === null) return accept();
      txn.dirty = true;
      session.replyNow(frame);
    });
  };
  const positions = strategy === undefined ? keyPositions(info, args) : [];
  if (positions !== null) return queueWithKeys(positions.map((p) => args[p]));
  // Keys only the node can find (SORT ... BY, STORE): asked as outside a transaction; the session
  // holds its next requests until this one is queued, so QUEUED replies keep their order.
  return keysFromNode(ctx, session.id, args).then((keys) => queueWithKeys(keys));
}

/** A node that answers BUSY on a spare connection within this long is running a script. */
const BUSY_PROBE_MS = 1000;

/**
 * The node's BUSY reply when the transaction's node runs a script past its busy threshold now: one
 * Redis then refuses every command queued, and EXEC, with it. Null when there is no sign of one
 * (nothing asked of the node: see BackendPool.mayBeBusy); else a promise of the node's answer.
 */
function busyNodeReply(ctx: ProxyContext, txn: Transaction, lane: number): Promise<Buffer | null> | null {
  const shard = boundShard(ctx, txn);
  const address = txn.watch?.address ?? (shard === UNBOUND ? null : writeNodeOf(ctx, shard));
  if (address === null || !ctx.pool.mayBeBusy(address)) return null;
  return ctx.pool.busyReply(address, lane, BUSY_PROBE_MS);
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

function refuseQueued(session: TransactionClient, txn: Transaction, message: string): undefined {
  txn.dirty = true;
  session.replyNow(encode.error(message));
  return undefined;
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
  for (const p of positions) {
    txn.keys.push(args[p]);
    txn.watchedKeys.add(args[p].toString('latin1'));
  }
  const fresh = txn.watch === null;
  const link = txn.watch ?? openWatch(ctx, session, txn, shard);
  if (link === null) return;
  txn.shard = shard;
  const reply = session.track(new DirectCommand(session, encode.command(args)));
  const watched = positions.map((p) => args[p]);
  // A WATCH the node refused (CLUSTERDOWN, a lost node) watches nothing: its keys no longer bind the transaction.
  const refused = (): void => {
    txn.keys = txn.keys.filter((k) => !watched.includes(k));
    for (const k of watched) txn.watchedKeys.delete(k.toString('latin1'));
    if (txn.keys.length === 0 && !txn.inMulti && session.transaction === txn) end(session, txn);
  };
  let failover: FailoverWait | null = null;
  const send = (on: DedicatedLink, first: boolean): void =>
    on.conn.send({
      payload: reply.payload,
      onReply: (frame) => {
        if (isClusterDown(frame) || isRedirect(frame)) {
          // Nothing is watched, and the client's retry loop expects a failed EXEC, not an error
          // here (nor a redirection it cannot follow); a MOVED teaches the slot map its new owner.
          if (frame[1] === 77 /* M */) learnMoved(ctx, frame, on.address);
          txn.doomed = true;
          return reply.onReply(encode.OK);
        }
        if (frame[0] === 45) refused();
        reply.onReply(frame);
      },
      onFailure: (message, written) => {
        failover ??= new FailoverWait(ctx);
        if (!written && failover.applies(on.address)) {
          // A Sentinel master down or moved before the WATCH reached it. Earlier WATCHes on the
          // connection are gone with it: EXEC will answer nil, as when a watched key was touched.
          if (!first) {
            txn.doomed = true;
            return reply.onReply(encode.OK);
          }
          // The first: it waits for the successor and watches there, as a plain command waits.
          if (failover.retry(on.address, () => rewatch(on))) return;
        }
        refused();
        reply.onFailure(failover.gaveUp(on.address, message));
      },
    });
  const rewatch = (dead: DedicatedLink): void => {
    if (txn.watch !== dead || session.transaction !== txn) return reply.onReply(encode.OK); // dropped meanwhile (RESET, UNWATCH)
    dead.release();
    txn.watch = null;
    const again = openWatch(ctx, session, txn, shard, reply);
    if (again !== null) send(again, true);
  };
  send(link, fresh);
}

/**
 * A dedicated connection to the node that writes `shard`, kept as the transaction's WATCH link;
 * null (the client answered, through `reply` when it has one) when no node serves the shard.
 */
function openWatch(ctx: ProxyContext, session: TransactionClient, txn: Transaction, shard: number, reply?: ReplySlot): DedicatedLink | null {
  const address = writeNodeOf(ctx, shard);
  if (address === null) {
    end(session, txn);
    const frame = encode.error(errors.SLOT_NOT_SERVED);
    if (reply === undefined) session.replyNow(frame);
    else reply.complete(frame);
    return null;
  }
  const link = new DedicatedLink(address, ctx.pool.dedicated(address, 0, session.protocol), session.dedicated);
  txn.watch = link;
  return link;
}
