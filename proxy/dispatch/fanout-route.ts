/**
 * Keyless commands that reach every master (DBSIZE, KEYS, SCAN, INFO, SCRIPT/FUNCTION, SLOWLOG ...):
 * how each is merged into one reply, outside a transaction (`fanout`) and inside one
 * (`spreadInMulti`, for transaction.ts), and which go out of the client's lane.
 */
import { ProxyContext } from '../context';
import { ClientSession } from '../client/client-session';
import { Strategy } from '../commands/policy';
import * as encode from '../resp/encode';
import { FanoutCommand, ScanCommand, allOk, andArrays, concatArrays, firstNonNil, killMerge, sumIntegers } from './fanout';
import { FollowedFanout } from './followed-fanout';
import { functionStatsMerge } from './function-stats';
import { InfoServer, infoFanout, infoMerge, onlyProxySection } from './info';
import { RandomKeyCommand } from './random-key';
import { SERVER_MERGES, latencyResetMerge } from './server-merges';
import { heldScripts, rememberingScripts } from './script-call';
import { Spread } from './transaction';
import { FOLLOWS_TO_TARGET, followOnTarget } from '../migration/target-mirror';

const FANOUT_MERGES = new Map([
  ['dbsize', sumIntegers],
  ['keys', concatArrays],
  ['flushall', allOk],
  ['flushdb', allOk],
  ['script|load', allOk],
  ['script|flush', allOk],
  ['script|kill', killMerge],
  ['function|load', allOk],
  ['function|delete', allOk],
  ['function|flush', allOk],
  ['function|restore', allOk],
  ['function|kill', killMerge],
  ['function|stats', functionStatsMerge],
  ['memory|purge', allOk],
  ['client|pause', allOk],
  ['client|unpause', allOk],
  ['slowlog|len', sumIntegers],
  ['slowlog|reset', allOk],
]);

/**
 * Sent on a connection of their own per master: the client's lane may be stuck behind the busy
 * script they kill, or behind a write that the pause they end holds.
 */
const OUT_OF_LANE: ReadonlySet<string> = new Set(['script|kill', 'function|kill', 'client|unpause']);

/**
 * How a command that reaches several nodes is merged when it runs inside MULTI (transaction.ts):
 * the merge it has outside a transaction; null for the others, and for SCAN, whose cursor walks
 * the masters one by one, and the KILLs, which must not queue behind what they kill.
 */
export function spreadInMulti(ctx: ProxyContext, server: InfoServer, name: string, strategy: Strategy | undefined, args: Buffer[]): Spread | null {
  if (strategy?.kind === 'every-node') return { merge: allOk, everyNode: true };
  if (strategy?.kind === 'every-master') return { merge: allOk, everyNode: false };
  if (strategy?.kind !== 'fanout' || name === 'scan' || OUT_OF_LANE.has(name)) return null;
  if (name === 'info') return { merge: infoMerge(ctx, server, args), everyNode: false };
  if (name === 'randomkey') return { merge: firstNonNil, everyNode: false };
  if (name === 'script|exists') return { merge: andArrays(args.slice(2).map(() => false)), everyNode: false };
  const merge = FANOUT_MERGES.get(name) ?? SERVER_MERGES.get(name)?.(args, 2);
  return merge === undefined ? null : { merge: rememberingScripts(ctx.scripts, name, args, merge), everyNode: false };
}

/** A keyless command sent to every master (SCAN walks them in turn) and merged into one reply. */
export function fanout(ctx: ProxyContext, server: InfoServer, session: ClientSession, name: string, args: Buffer[], raw: Buffer | null): void {
  const masters = ctx.router.masters();
  switch (name) {
    case 'scan':
      session.track(new ScanCommand(session, masters)).start(ctx, args);
      return;
    case 'randomkey':
      session.track(new RandomKeyCommand(ctx, session, masters)).start();
      return;
    case 'info': {
      if (onlyProxySection(args)) return session.replyNow(encode.bulk(`${server.proxySection()}\r\n`));
      const { merge, after } = infoFanout(ctx, server, args);
      session.track(new FanoutCommand(session, masters, merge)).start(ctx, raw ?? encode.command(args), false, after);
      return;
    }
  }
  if (name === 'latency|reset') {
    // Behind a LATENCY LATEST on each master: the count is of distinct events (server-merges.ts).
    const latest = encode.command(['LATENCY', 'LATEST']);
    session.track(new FanoutCommand(session, masters, latencyResetMerge(args))).start(ctx, latest, false, raw ?? encode.command(args));
    return;
  }
  let merge = FANOUT_MERGES.get(name) ?? SERVER_MERGES.get(name)?.(args, session.protocol);
  if (name === 'script|exists') {
    const held = heldScripts(ctx.scripts, args);
    if (held.every((h) => h)) {
      session.replyNow(encode.arrayOfFrames(held.map(() => encode.integer(1))));
      return;
    }
    merge = andArrays(held);
  }
  if (merge === undefined) {
    session.replyNow(encode.error(`ERR slotproxy: no merge for '${name}'`));
    return;
  }
  const remembering = rememberingScripts(ctx.scripts, name, args, merge);
  const placement = ctx.ring?.placement;
  if (placement !== undefined && placement.converges && FOLLOWS_TO_TARGET.has(name)) {
    // Writes land on A until done: A's masters take it (their reply is the client's), then B's.
    const follow = (): Promise<string | null> => followOnTarget(ctx, placement, name, args);
    session.track(new FollowedFanout(session, placement.from.masters(), remembering, follow)).start(ctx, raw ?? encode.command(args));
    return;
  }
  const protocol = name === 'function|stats' ? session.protocol : 2;
  session.track(new FanoutCommand(session, masters, remembering, protocol)).start(ctx, raw ?? encode.command(args), OUT_OF_LANE.has(name));
}
