/**
 * One strategy per request: answer locally, route to the node owning its keys, fan out to every
 * master, or refuse with an error naming the command. Checks happen in Redis's order: unknown
 * command, arity, then keys (CROSSSLOT), so clients get the error a single Redis would give.
 */
import { ProxyContext } from '../context';
import { BLOCKING, CommandInfo, READONLY, SCRIPT_NAMED } from '../commands/table';
import { arityMismatch, keyPositions, resolveSubcommand } from '../commands/keys';
import { LOCAL_SUBCOMMAND_ARITY, POLICY, RING_POLICY, Strategy, strategyFor } from '../commands/policy';
import { ANY_MASTER, ForwardedCommand, slotArgument } from './forward';
import { InfoServer } from './info';
import { fanout, spreadInMulti } from './fanout-route';
import { EveryNodeCommand, everyNode } from './every-node';
import { answerLocally } from './local';
import { clientCommand } from './client-command';
import { ReplySlot } from '../client/reply-slot';
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { versionAtLeast } from '../resp/backend-version';
import { blocks, switchesConnection } from './order-barrier';
import { ClientInfoFormat, clientInfoFormat } from '../client/client-list';
import { convergingWrite, writePayload } from '../migration/start';
import { CarriedWrite } from './carried-write';
import { mustWaitForCopy, sendHeldUntilCopied, writesUndeclared } from '../migration/after-copy';
import { isProxyCommand, proxyCommand } from '../migration/admin';
import { blockingRoute } from '../migration/converging-block';
import { noteTargetRefusal } from '../migration/target-refusals';
import { FOLLOWS_TO_TARGET } from '../migration/target-mirror';
import { WAIT_FOR_SWITCH_CARRY, switchCarry } from '../migration/carry';
import { TransactionClient, discardTransaction, queueInTransaction, queueSubscription, transactionCommand } from './transaction';
import { pubsubCommand } from './pubsub';
import { SubscriberClient } from '../pubsub/subscription';
import { SUBSCRIBED_MODE_COMMANDS } from '../pubsub/subscription-state';
import { SUBSCRIPTION_COMMANDS } from './exec-subscriptions';
import { runBlocking, runWait } from './blocking';
import { ConfigGet } from './config-get';
import { SCRIPT_CALLS, numkeysError, scriptCall } from './script-call';
import { SPLIT_RULES, SplitCommand, SplitRule, groupByShard, partPositions, splitByShard } from './split';
import { PlainSplit } from './split-part';
import { PROXY_COMMAND, UserPermissions } from '../security/permissions';
import { CachingClient, ScriptSource } from '../tracking/client-caching';
import { MonitorClient, MonitorFeed } from './monitor';
import { WatchedCommand } from './watched-command';

/** What the dispatcher needs of a client session: what every strategy needs, and the state of those that keep some. */
export interface DispatchSession extends TransactionClient, SubscriberClient, CachingClient, MonitorClient {
  /** What the signed-in user may run; null for everything (security/permissions.ts). */
  readonly permissions: UserPermissions | null;
  /** read-new: resolves once every write of this client whose reply waits for B is on B (null: none waits). */
  writesOnB: Promise<void> | null;
}

const NOAUTH_REPLY = encode.error(errors.NOAUTH);

export class Dispatcher {
  private readonly scriptSource: ScriptSource;
  /** Clients in MONITOR mode; `monitors.active` is the hot path's one check for them. */
  readonly monitors = new MonitorFeed();

  constructor(private readonly ctx: ProxyContext, private readonly server: InfoServer) {
    // Client-side caching reads a script's text to know whether it may read (tracking/script-use.ts).
    this.scriptSource = { get table() { return ctx.table; }, body: (sha) => ctx.scripts.get(sha) };
  }

  /** How commands that are not simply routed by their keys are handled, in this proxy's mode (which a finished migration may change). */
  private get policy(): ReadonlyMap<string, Strategy> {
    return this.ctx.mode === 'ring' ? RING_POLICY : POLICY;
  }

  /** New sessions start unauthenticated unless the default user is `on nopass` (no `auth` section, or requirepass ""). */
  get requiresAuth(): boolean {
    return this.ctx.auth.requiresAuth;
  }

  /** Which CLIENT LIST line the back end's version writes. */
  get clientInfoFormat(): ClientInfoFormat {
    return clientInfoFormat(this.ctx.backendServer, this.ctx.backendVersion);
  }

  /** The request must wait for the client's earlier replies before it is sent (order-barrier.ts). */
  switchesConnection(session: DispatchSession, args: Buffer[]): boolean {
    return switchesConnection(this.ctx.table, session, args);
  }

  /** A user's permissions under the current config (null: everything). */
  permissionsOf(user: string): UserPermissions | null {
    return this.ctx.auth.permissionsOf(user);
  }

  /**
   * Handles one request. Returns a promise when the keys can only be learned from a node
   * (COMMAND GETKEYS): the session must hold its later requests until it settles, to keep order.
   */
  dispatch(session: DispatchSession, args: Buffer[], raw: Buffer | null): Promise<void> | undefined {
    const ctx = this.ctx;
    const top = ctx.table.lookup(args[0]);
    // read-new: a request after writes still on their way to B waits for them, unless it is one
    // more write to A (A orders it after them, and its reply comes after theirs anyway).
    const onB = session.writesOnB;
    if (onB !== null && !passesWritesOnB(top, args, session)) return onB.then(() => this.dispatch(session, args, raw));
    ctx.stats.commands++;
    if (top === undefined) {
      // The proxy's own PROXY command is in no Redis's table: looked for only here, off the hot path.
      if (isProxyCommand(args[0])) {
        if (session.authenticated && session.permissions !== null && this.refused(session, PROXY_COMMAND, args)) return undefined;
        replyEventually(session, session.authenticated ? proxyCommand(ctx, args) : NOAUTH_REPLY);
        return undefined;
      }
      flagTransaction(session);
      session.replyNow(encode.errorBytes(errors.unknownCommand(args[0], args.slice(1))));
      return undefined;
    }
    if (arityMismatch(top, args.length)) {
      if (top.name === 'exec') {
        // Redis rejects a malformed EXEC as an aborted transaction, even outside MULTI.
        if (session.transaction !== null) discardTransaction(session, session.transaction);
        session.replyNow(encode.error(errors.execAbort(errors.wrongArity(top.name))));
        return undefined;
      }
      flagTransaction(session);
      session.replyNow(encode.error(errors.wrongArity(top.name)));
      return undefined;
    }
    let info = top;
    let container: string | null = null;
    // Alone, a container runs itself, as in Redis (COMMAND); the others failed their arity above.
    if (top.subcommands !== null && args.length > 1) {
      const sub = resolveSubcommand(top, args);
      if (Buffer.isBuffer(sub) && this.answersUnknownSubcommand(session, top.name, sub, args)) return undefined;
      if (sub === null || Buffer.isBuffer(sub)) {
        flagTransaction(session);
        session.replyNow(encode.errorBytes(errors.unknownSubcommand(top.name, sub ?? Buffer.alloc(0))));
        return undefined;
      }
      if (arityMismatch(sub, args.length)) {
        flagTransaction(session);
        session.replyNow(encode.error(errors.wrongArity(sub.name)));
        return undefined;
      }
      info = sub;
      container = top.name;
    }
    if (!session.authenticated && !info.flags.has('no_auth')) {
      ctx.stats.noauthErrors++;
      session.replyNow(NOAUTH_REPLY);
      return undefined;
    }
    // Redis refuses its `no_multi` commands inside MULTI right after AUTH, before the ACL check and
    // before anything of slotproxy's own (the transaction then aborts).
    if (session.transaction !== null && session.transaction.inMulti && info.flags.has('no_multi')) {
      flagTransaction(session);
      session.replyNow(encode.error(errors.NOT_ALLOWED_IN_MULTI));
      return undefined;
    }
    // Redis's ACL check comes here: after AUTH, before MULTI queues it, before keys are routed or split.
    if (session.permissions !== null && this.refused(session, info, args)) return undefined;
    if (this.monitors.active && this.monitorRefused(session, info, args)) return undefined;
    info.counters.calls++;
    session.command = info.name;
    // Past tracking-table-max-keys, keys are evicted before any command runs, as Redis's processCommand does.
    ctx.caching.commandArrived(session, info, args, session.transaction?.inMulti === true);
    const tracking = session.tracking;
    if (tracking !== null) ctx.caching.beforeCommand(session, tracking, info, args, session.transaction?.inMulti === true, this.scriptSource);

    const strategy = strategyFor(info.name, container, container !== null && hasKeySpecs(info), this.policy);
    // Subscribed mode and an open MULTI take every command (pubsub.ts, transaction.ts).
    // In RESP3, messages are push frames, so a subscribed client may run any command (as on Redis).
    // Inside MULTI a (un)subscribe is queued like any command, and runs at EXEC (exec-subscriptions.ts).
    if (session.transaction?.inMulti === true && SUBSCRIPTION_COMMANDS.has(info.name)) {
      return queueSubscription(session, session.transaction, info.name, () => pubsubCommand(ctx, session, info, args, null));
    }
    if (session.subscription !== null && (session.protocol === 2 || SUBSCRIBED_MODE_COMMANDS.has(info.name))) {
      session.subscription.command(info, args);
      return undefined;
    }
    const txn = session.transaction;
    if (txn !== null && txn.inMulti && strategy?.kind !== 'transaction' && !RUN_INSIDE_MULTI.has(info.name)) {
      return queueInTransaction(ctx, session, txn, info, strategy, args, raw, spreadInMulti(ctx, this.server, info.name, strategy, args));
    }
    if (strategy !== undefined) {
      switch (strategy.kind) {
        case 'local':
          // RESET also discards a transaction and its WATCH, as in Redis.
          if (info.name === 'reset' && txn !== null) discardTransaction(session, txn);
          if (info.name === 'reset') {
            ctx.caching.disable(session); // RESET switches tracking off, and ends monitor mode, as in Redis
            this.monitors.detach(session);
          }
          session.replyNow(answerLocally(ctx, session, info.name, args));
          return undefined;
        case 'client':
          // One that waits (TRACKING ON for the feeds, UNBLOCK) holds the client's later requests, as one Redis would.
          return replyEventually(session, clientCommand(ctx, session, info.name, args));
        case 'refuse':
          session.replyNow(encode.error(errors.unsupported(container ?? info.name, strategy.why)));
          return undefined;
        case 'fanout': {
          // Just switched phase: what side B holds changes after the copy to B, not under it (migration/carry.ts).
          const carrying = FOLLOWS_TO_TARGET.has(info.name) ? switchCarry(ctx) : null;
          if (carrying !== null) return carrying.then(() => fanout(ctx, this.server, session, info.name, args, raw));
          fanout(ctx, this.server, session, info.name, args, raw);
          return undefined;
        }
        case 'any-master':
          if (info.name === 'config|get' && session.transaction === null) {
            session.track(new ConfigGet(ctx, session, raw ?? encode.command(args))).start();
            return undefined;
          }
          return this.forward(session, args, raw, ANY_MASTER, info);
        case 'slot':
          return this.forward(session, args, raw, slotArgument(args[2]), info);
        case 'every-node':
          session.track(new EveryNodeCommand(ctx, session, everyNode(ctx))).start(info.name, args);
          return undefined;
        case 'every-master':
          session.track(new EveryNodeCommand(ctx, session, ctx.router.masters())).start(info.name, args);
          return undefined;
        case 'transaction':
          return transactionCommand(ctx, session, info, args);
        case 'pubsub':
          pubsubCommand(ctx, session, info, args, raw);
          return undefined;
        case 'wait':
          return runWait(ctx, session, raw ?? encode.command(args));
        case 'monitor':
          this.monitors.attach(session);
          return undefined;
      }
    }
    const positions = keyPositions(info, args);
    if (positions === null) return this.routeWithNodeKeys(session, info, args, raw);
    return this.route(session, info, args, raw, positions);
  }

  /** A user's rules refuse the request: Redis's NOPERM (inside MULTI, EXEC then aborts), counted. */
  private refused(session: DispatchSession, info: CommandInfo, args: Buffer[]): boolean {
    const denial = (session.permissions as UserPermissions).check(info, args);
    if (denial === null) return false;
    this.ctx.stats.aclDenied[denial.reason]++;
    if (denial.object !== undefined) {
      // Redis sets the client's last command before its ACL check: the log's client line names it.
      session.command = info.name;
      const context = session.transaction?.inMulti === true ? 'multi' : 'toplevel';
      this.ctx.aclLog.add(denial.reason, context, denial.object, session.user, this.ctx.clients.get(session.id)?.describe() ?? '');
    }
    flagTransaction(session);
    // The back end's words: Redis 7.2 reworded NOPERM.
    const message =
      denial.object !== undefined && versionAtLeast(this.ctx.backendVersion, 7, 2) ? errors.noperm72(denial.reason, denial.object, session.user) : denial.message;
    session.replyNow(encode.error(message));
    return true;
  }

  /**
   * With a monitor attached: the request is shown to the monitors (when EXEC runs it, for one
   * queued in MULTI), or refused when a monitor itself touches the keyspace, as Redis refuses it.
   */
  private monitorRefused(session: DispatchSession, info: CommandInfo, args: Buffer[]): boolean {
    const txn = session.transaction;
    const phase = txn === null || !txn.inMulti ? 'run' : info.name !== 'exec' ? 'queue' : txn.dirty ? 'abort' : 'run';
    const refusal = this.monitors.command(session, info, args, phase);
    if (refusal === null) return false;
    flagTransaction(session);
    session.replyNow(refusal);
    return true;
  }

  /**
   * Subcommands the proxy answers itself even when the back end does not know them: CLIENT SETINFO
   * came with Redis 7.2, and client libraries send it on connect to older servers too.
   */
  private answersUnknownSubcommand(session: DispatchSession, container: string, sub: Buffer, args: Buffer[]): boolean {
    const name = `${container}|${sub.toString('latin1').toLowerCase()}`;
    const arity = LOCAL_SUBCOMMAND_ARITY.get(name);
    if (arity === undefined) return false;
    if (!session.authenticated) {
      this.ctx.stats.noauthErrors++;
      session.replyNow(NOAUTH_REPLY);
      return true;
    }
    if (args.length !== arity) session.replyNow(encode.error(errors.wrongArity(name)));
    else replyEventually(session, clientCommand(this.ctx, session, name, args));
    return true;
  }

  private route(session: DispatchSession, info: CommandInfo, args: Buffer[], raw: Buffer | null, positions: readonly number[]): Promise<void> | undefined {
    if (positions.length === 0) {
      const script = SCRIPT_CALLS.get(info.name);
      const badNumkeys = script === 'eval' || script === 'evalsha' ? numkeysError(args) : null;
      if (badNumkeys !== null) {
        session.replyNow(encode.error(badNumkeys));
        return undefined;
      }
      if (!hasKeySpecs(info)) {
        session.replyNow(encode.error(errors.unsupported(info.name, 'it has no key to route it by')));
        return;
      }
      // Keys expected but none found (EVAL with numkeys 0, or malformed arguments): any master
      // runs it, or answers with Redis's own error.
      this.forward(session, args, raw, ANY_MASTER, info);
      return;
    }
    const router = this.ctx.router;
    const shard = router.shardOf(args[positions[0]]);
    for (let i = 1; i < positions.length; i++) {
      const other = router.shardOf(args[positions[i]]);
      if (other !== shard) {
        const rule = this.ctx.crossSlot === 'split' && session.transaction === null ? SPLIT_RULES.get(info.name) : undefined;
        if (rule !== undefined) return this.split(session, info, args, positions, rule, shard, i, other);
        this.ctx.stats.crossSlotErrors++;
        noteTargetRefusal(this.ctx, info.name, positions.map((p) => args[p]));
        session.replyNow(encode.error(errors.CROSSSLOT));
        return;
      }
    }
    return this.routeTo(session, info, args, raw, positions, shard);
  }

  /** A request whose keys all belong to `shard`: written where the ring's migration phase says, else forwarded. */
  private routeTo(session: DispatchSession, info: CommandInfo, args: Buffer[], raw: Buffer | null, positions: readonly number[], shard: number): Promise<void> | undefined {
    const ring = this.ctx.ring;
    if (ring === null) return this.forward(session, args, raw, shard, info);
    // Just switched phase: a function or script runs once side B holds A's (migration/carry.ts).
    const traits = info.traits;
    const carrying = (traits & SCRIPT_NAMED) !== 0 && WAIT_FOR_SWITCH_CARRY.has(info.name) ? switchCarry(this.ctx) : null;
    if (carrying !== null) return carrying.then(() => this.route(session, info, args, raw, positions));
    const readonly = (traits & READONLY) !== 0;
    const held = readonly ? null : ring.writesHeld;
    if (held !== null) return held.then(() => this.route(session, info, args, raw, positions));
    const placement = ring.placement;
    if (!readonly && !placement.converges) {
      // Just switched to done: this proxy's double-writes finish before any B-only write.
      const drained = ring.drained();
      if (drained !== null) return drained.then(() => this.route(session, info, args, raw, positions));
    }
    if ((traits & BLOCKING) !== 0 && blocks(info, args) && session.transaction?.pinnedTo(shard) !== true) {
      // Where it blocks, and the copy of what it pops, follow the phase even while it blocks.
      const keys = positions.map((p) => args[p]);
      return runBlocking(this.ctx, session, raw ?? encode.command(args), shard, blockingRoute(this.ctx, session, keys, readonly));
    }
    // Keys whose owner does not change are written as usual (A and B are the same node).
    if (!readonly && placement.converges) {
      const started = convergingWrite(this.ctx, session, info, args, raw, shard, positions, placement);
      if (started !== null) {
        if ('hold' in started) return started.hold;
        const write = session.track(new CarriedWrite(this.ctx, session, writePayload(this.ctx, args, raw), shard, started.carry, started.onB === true, placement.phase === 'double-write'));
        write.start();
        // Read-new: the client's next requests but its writes (a read from B) wait until this write is on B.
        if (started.onB === true && placement.phase === 'read-new') waitOnB(session, write.onB);
        return undefined;
      }
    }
    return this.forward(session, args, raw, shard, info);
  }

  /**
   * crossSlot: split: one request per shard, merged in key order (split.ts). route() found the keys
   * before `firstOther` on `shard` and that one on `other`: those are not hashed again.
   */
  private split(
    session: DispatchSession,
    info: CommandInfo,
    args: Buffer[],
    positions: readonly number[],
    rule: SplitRule,
    shard: number,
    firstOther: number,
    other: number,
  ): Promise<void> | undefined {
    if ((args.length - 1) % rule.stride !== 0) {
      session.replyNow(encode.error(errors.wrongArity(info.name))); // MSET with a key and no value
      return undefined;
    }
    this.ctx.stats.splitCommands++;
    const router = this.ctx.router;
    const shardOf = (key: Buffer, k: number): number => (k < firstOther ? shard : k === firstOther ? other : router.shardOf(key));
    const ring = this.ctx.ring;
    if (this.ctx.replicaReads === null && (ring === null || (!ring.placement.converges && ring.drained() === null))) {
      // The plain path (split-part.ts); a migration's converging writes and replica reads take the long one.
      // A ring's one-key parts keep the client's command, as nutcracker's fragments do: its servers
      // see the bytes nutcracker would send, and its stats count them (request_bytes, response_bytes).
      const groups = groupByShard(args, positions, shardOf);
      session.track(new PlainSplit(this.ctx, session, rule, groups, positions.length, info.flags.has('readonly'))).send(rule, args, positions, ring === null);
      return undefined;
    }
    const parts = splitByShard(args, positions, rule.stride, shardOf);
    const command = session.track(new SplitCommand(session, rule, parts, positions.length));
    let holds: Promise<void>[] | null = null;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i];
      // The part's shard is known: no second hash of its keys.
      const positions = partPositions(rule.stride, part.keyIndexes.length);
      const partSession = command.partSession(i);
      const hold = this.routeTo(partSession, info, part.args, null, positions, part.shard);
      if (hold !== undefined) (holds ??= []).push(hold);
      // A part written in read-new: the client's later reads wait for it as for its own writes.
      if (partSession.writesOnB !== null) waitOnB(session, partSession.writesOnB);
    }
    return holds === null ? undefined : Promise.all(holds).then(() => undefined);
  }

  /** Returns a promise when later requests must wait for this one (a blocking command). */
  private forward(session: DispatchSession, args: Buffer[], raw: Buffer | null, shard: number, info: CommandInfo): Promise<void> | undefined {
    const payload = raw ?? encode.command(args);
    const txn = session.transaction;
    const watchLink = txn !== null && txn.pinnedTo(shard) ? txn.watch : null;
    if (watchLink !== null) {
      // Between WATCH and MULTI: on the WATCH connection, in order.
      session.track(new WatchedCommand(this.ctx, session, payload, shard, (info.traits & READONLY) !== 0, txn!, watchLink)).start();
      return undefined;
    }
    const traits = info.traits;
    if ((traits & BLOCKING) !== 0 && blocks(info, args)) return runBlocking(this.ctx, session, payload, shard);
    const script = (traits & SCRIPT_NAMED) !== 0 ? SCRIPT_CALLS.get(info.name) : undefined;
    if (script !== undefined) {
      const readonly = (traits & READONLY) !== 0;
      if (writesUndeclared(info.name) && mustWaitForCopy(this.ctx)) {
        // The keys it writes may be undeclared: its reply waits until its node's changes are on side B.
        const held = sendHeldUntilCopied(this.ctx, session, (owner) => scriptCall(this.ctx, owner, script, args, payload, shard, readonly));
        this.ctx.ring?.track(held);
        return this.ctx.ring?.placement.phase === 'read-new' ? held : undefined;
      }
      session.track(scriptCall(this.ctx, session, script, args, payload, shard, readonly)).start();
      return undefined;
    }
    session.track(new ForwardedCommand(this.ctx, session, payload, shard, (traits & READONLY) !== 0)).start();
    return undefined;
  }

  /** Keys that only the node can find (SORT ... BY, MIGRATE ... KEYS): ask COMMAND GETKEYS first. */
  private async routeWithNodeKeys(session: DispatchSession, info: CommandInfo, args: Buffer[], raw: Buffer | null): Promise<void> {
    const masters = this.ctx.router.masters();
    let positions: number[] = [];
    if (masters.length > 0) {
      try {
        const frame = await request(this.ctx.pool.connection(masters[session.id % masters.length], session.id), ['COMMAND', 'GETKEYS', ...args]);
        const reply = decodeReply(frame, true);
        if (Array.isArray(reply)) {
          // GETKEYS names the keys, not their positions; routing needs only the keys.
          const keys = reply.filter((k): k is Buffer => Buffer.isBuffer(k));
          const withKeys = [...args, ...keys];
          positions = keys.map((_, i) => args.length + i);
          await this.route(session, info, withKeys, raw ?? encode.command(args), positions);
          return;
        }
      } catch {
        // Fall through: the node will answer the command itself.
      }
    }
    await this.route(session, info, args, raw, positions);
  }
}

/** Replies now, or once `reply` settles: then later requests must wait for it (the returned promise). */
function replyEventually(session: DispatchSession, reply: Buffer | Promise<Buffer>): Promise<void> | undefined {
  if (Buffer.isBuffer(reply)) {
    session.replyNow(reply);
    return undefined;
  }
  const slot = session.track(new ReplySlot(session));
  return reply.then((r) => slot.complete(r));
}

/** Run at once inside MULTI, as Redis does, instead of being queued. */
const RUN_INSIDE_MULTI: ReadonlySet<string> = new Set(['quit', 'reset']);

/** Unknown commands and arity errors inside MULTI make EXEC answer EXECABORT, as Redis does. */
function flagTransaction(session: DispatchSession): void {
  if (session.transaction !== null && session.transaction.inMulti) session.transaction.dirty = true;
}

function hasKeySpecs(info: CommandInfo): boolean {
  return info.keySpecs.length > 0 || info.firstKey > 0;
}

/** `write` joins what the client's next requests but its writes wait for (DispatchSession.writesOnB). */
function waitOnB(session: DispatchSession, write: Promise<void>): void {
  const before = session.writesOnB;
  const all: Promise<void> = before === null ? write : Promise.all([before, write]).then(() => undefined);
  session.writesOnB = all;
  void all.then(() => {
    if (session.writesOnB === all) session.writesOnB = null;
  });
}

/**
 * Goes on past the client's writes still on their way to B: a write naming its keys, outside a
 * transaction, that does not block (it goes to A, as they did). Anything else may read from B.
 */
function passesWritesOnB(info: CommandInfo | undefined, args: Buffer[], session: DispatchSession): boolean {
  if (info === undefined || info.subcommands !== null || (info.traits & (READONLY | BLOCKING)) !== 0 || session.transaction !== null) return false;
  return (keyPositions(info, args)?.length ?? 0) > 0;
}
