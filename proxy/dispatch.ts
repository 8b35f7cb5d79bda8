/**
 * One strategy per request: answer locally, route to the node owning its keys, fan out to every
 * master, or refuse with an error naming the command. Checks happen in Redis's order: unknown
 * command, arity, then keys (CROSSSLOT), so clients get the error a single Redis would give.
 */
import { ProxyContext } from './context';
import { CommandInfo } from './commands/table';
import { arityMismatch, keyPositions, resolveSubcommand } from './commands/keys';
import { BLOCKS_ONLY_WITH_BLOCK_ARG, LOCAL_SUBCOMMAND_ARITY, strategyFor } from './commands/policy';
import { ANY_MASTER, ForwardedCommand } from './forward';
import { FanoutCommand, ScanCommand, allOk, andArrays, anyOk, concatArrays, mergeInfo, sumIntegers } from './fanout';
import { LocalSession, answerLocally } from './local';
import { ReplyOwner, ReplySlot } from './reply-slot';
import { request } from './backend/request';
import { decodeReply } from './resp/decode-reply';
import * as encode from './resp/encode';
import * as errors from './errors';

/** What the dispatcher needs of a client session. */
export interface DispatchSession extends ReplyOwner, LocalSession {
  /** Appends a slot to the session's reply order. */
  track<S extends ReplySlot>(slot: S): S;
  /** Appends an already-answered slot. */
  replyNow(reply: Buffer): void;
}

const FANOUT_MERGES = new Map([
  ['dbsize', sumIntegers],
  ['keys', concatArrays],
  ['flushall', allOk],
  ['flushdb', allOk],
  ['script|load', allOk],
  ['script|flush', allOk],
  ['script|exists', andArrays],
  ['script|kill', anyOk],
]);

export class Dispatcher {
  constructor(private readonly ctx: ProxyContext, private readonly proxyInfo: () => string) {}

  /**
   * Handles one request. Returns a promise when the keys can only be learned from a node
   * (COMMAND GETKEYS): the session must hold its later requests until it settles, to keep order.
   */
  dispatch(session: DispatchSession, args: Buffer[], raw: Buffer | null): Promise<void> | undefined {
    const ctx = this.ctx;
    ctx.stats.commands++;
    const top = ctx.table.lookup(args[0]);
    if (top === undefined) {
      session.replyNow(encode.error(errors.unknownCommand(args[0], args.slice(1))));
      return undefined;
    }
    if (arityMismatch(top, args.length)) {
      session.replyNow(encode.error(errors.wrongArity(top.name)));
      return undefined;
    }
    let info = top;
    let container: string | null = null;
    if (top.subcommands !== null) {
      const sub = resolveSubcommand(top, args);
      if (Buffer.isBuffer(sub) && this.answersUnknownSubcommand(session, top.name, sub, args)) return undefined;
      if (sub === null || Buffer.isBuffer(sub)) {
        session.replyNow(encode.error(errors.unknownSubcommand(top.name, sub ?? Buffer.alloc(0))));
        return undefined;
      }
      if (arityMismatch(sub, args.length)) {
        session.replyNow(encode.error(errors.wrongArity(sub.name)));
        return undefined;
      }
      info = sub;
      container = top.name;
    }

    const strategy = strategyFor(info.name, container);
    if (strategy !== undefined) {
      switch (strategy.kind) {
        case 'local':
          session.replyNow(answerLocally(ctx, session, info.name, args));
          return undefined;
        case 'refuse':
          session.replyNow(encode.error(errors.unsupported(container ?? info.name, strategy.why)));
          return undefined;
        case 'fanout':
          this.fanout(session, info.name, args, raw);
          return undefined;
        case 'any-master':
          this.forward(session, args, raw, ANY_MASTER, info);
          return undefined;
      }
    }
    if (info.flags.has('blocking') && blocks(info, args)) {
      session.replyNow(encode.error(errors.unsupported(info.name, 'blocking commands are not implemented by this version of slotproxy')));
      return undefined;
    }
    const positions = keyPositions(info, args);
    if (positions === null) return this.routeWithNodeKeys(session, info, args, raw);
    this.route(session, info, args, raw, positions);
    return undefined;
  }

  /**
   * Subcommands the proxy answers itself even when the back end does not know them: CLIENT SETINFO
   * came with Redis 7.2, and client libraries send it on connect to older servers too.
   */
  private answersUnknownSubcommand(session: DispatchSession, container: string, sub: Buffer, args: Buffer[]): boolean {
    const name = `${container}|${sub.toString('latin1').toLowerCase()}`;
    const strategy = strategyFor(name, null);
    if (strategy?.kind !== 'local') return false;
    const arity = LOCAL_SUBCOMMAND_ARITY.get(name);
    session.replyNow(
      arity !== undefined && args.length !== arity ? encode.error(errors.wrongArity(name)) : answerLocally(this.ctx, session, name, args),
    );
    return true;
  }

  private route(session: DispatchSession, info: CommandInfo, args: Buffer[], raw: Buffer | null, positions: number[]): void {
    if (positions.length === 0) {
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
      if (router.shardOf(args[positions[i]]) !== shard) {
        this.ctx.stats.crossSlotErrors++;
        session.replyNow(encode.error(errors.CROSSSLOT));
        return;
      }
    }
    this.forward(session, args, raw, shard, info);
  }

  private forward(session: DispatchSession, args: Buffer[], raw: Buffer | null, shard: number, info: CommandInfo): void {
    const payload = raw ?? encode.command(args);
    session.track(new ForwardedCommand(this.ctx, session, payload, shard, info.flags.has('readonly'))).start();
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
          this.route(session, info, withKeys, raw ?? encode.command(args), positions);
          return;
        }
      } catch {
        // Fall through: the node will answer the command itself.
      }
    }
    this.route(session, info, args, raw, positions);
  }

  private fanout(session: DispatchSession, name: string, args: Buffer[], raw: Buffer | null): void {
    const masters = this.ctx.router.masters();
    if (name === 'scan') {
      session.track(new ScanCommand(session, masters)).start(this.ctx, args);
      return;
    }
    const merge = name === 'info' ? mergeInfo(() => this.infoProxySection(args)) : FANOUT_MERGES.get(name);
    if (merge === undefined) {
      session.replyNow(encode.error(`ERR slotproxy: no merge for '${name}'`));
      return;
    }
    if (name === 'info' && onlyProxySection(args)) {
      session.replyNow(encode.bulk(`${this.proxyInfo()}\r\n`));
      return;
    }
    session.track(new FanoutCommand(session, masters, merge)).start(this.ctx, raw ?? encode.command(args));
  }

  private infoProxySection(args: Buffer[]): string {
    if (args.length === 1) return this.proxyInfo();
    const wanted = args.slice(1).map((a) => a.toString().toLowerCase());
    return wanted.some((s) => s === 'all' || s === 'everything' || s === 'default' || s === 'proxy') ? this.proxyInfo() : '';
  }
}

function onlyProxySection(args: Buffer[]): boolean {
  return args.length > 1 && args.slice(1).every((a) => a.toString().toLowerCase() === 'proxy');
}

function hasKeySpecs(info: CommandInfo): boolean {
  return info.keySpecs.length > 0 || info.firstKey > 0;
}

/** XREAD and XREADGROUP carry the `blocking` flag but only block with a BLOCK argument. */
function blocks(info: CommandInfo, args: Buffer[]): boolean {
  if (!BLOCKS_ONLY_WITH_BLOCK_ARG.has(info.name)) return true;
  return args.some((a) => a.length === 5 && a.toString('latin1').toLowerCase() === 'block');
}
