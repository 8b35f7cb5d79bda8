import { ProxyContext } from '../context';
import { CommandInfo } from '../commands/table';
import { ClientSession } from '../client/client-session';
import { Placement } from '../../sharding/migration';
import { ConvergingWrite } from './converging-write';
import { CarryState } from '../ring/carry-state';
import { joinsOpenBurst } from './converging-batch';
import { shardTargets } from './copy-keys';
import { writesUndeclared } from './after-copy';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';

/**
 * Starts a client's write under a converging placement when one of its keys changes owner (or
 * when it can ride in a burst of its client's, see below); null when none does (the caller
 * forwards it as usual: its node is the same in both rings).
 * `hold`: in read-new, reads go to ring B, so the session's next requests wait until this write
 * has reached B (a pipelined GET after SET must see the SET); in double-write reads go to A,
 * where the write already is, so nothing waits.
 *
 * In double-write, while no proxy of the fleet reads from B (read-barrier.ts), a write whose keys
 * it names is answered after A alone and the change feeds carry it: the caller forwards it as a CarriedWrite
 * (proxy/dispatch/carried-write.ts) counted by the `carry` returned. Scripts
 * (which may write keys they do not name), writes of a client in a transaction's state, and writes
 * to keys whose B node is known to be down still converge, as in read-new: the script's reply
 * waits for its node's feed as before, and a write to a B node that is down gets its clear error.
 */
/** A write started here (`hold`: what the session's next requests wait for), or one to forward counted by `carry`. */
export type ConvergingStart = { hold: Promise<void> | undefined } | { carry: CarryState; onB?: boolean };

export function convergingWrite(
  ctx: ProxyContext,
  session: ClientSession,
  /** The command's table entry, as the dispatcher found it (not looked up again on this hot path). */
  info: CommandInfo,
  args: Buffer[],
  raw: Buffer | null,
  shard: number,
  positions: readonly number[],
  placement: Placement,
): ConvergingStart | null {
  const undeclared = writesUndeclared(info.name);
  const inTransaction = ((session as { transaction?: unknown }).transaction ?? null) !== null;
  const carry = ctx.ring?.carry;
  // Every key of the request is of `shard` (the dispatcher checked): the shard names their owners.
  const moves = positions.length > 0 ? placement.copyTargetOfShard(shard) : null;
  if (carry?.replication === true) return replicatedWrite(carry, placement, moves !== null, undeclared, inTransaction);
  // Double-write's common write: answered after A, the feeds carry it (decided before any copy target is built).
  if (moves !== null && carry?.answerAfterA === true && placement.phase === 'double-write' && !undeclared && !inTransaction && feedsCarry(ctx, moves.to)) {
    return { carry };
  }
  const targets = moves === null ? [] : shardTargets(placement, positions.map((p) => args[p]), shard);
  const address = placement.writeAddress(shard);
  // Writes alike share a burst (converging-batch.ts): Redis refuses those flagged denyoom, and only those, when out of memory.
  const oomClass = info.flags.has('no_multi') ? null : info.flags.has('denyoom') ? 'denyoom' : 'other';
  if (targets.length === 0) {
    // Its node is the same in both rings. Behind a burst of its client's still open on the
    // connection it would close it (the client's order): it goes inside instead, nothing to copy.
    // Not for a client in a transaction's state (WATCH), whose writes have their own connection.
    if (address === null || undeclared || oomClass === null || inTransaction || ctx.sentinel?.holdsWrites(address) === true) return null;
    if (!joinsOpenBurst(ctx.pool.connection(address, session.id, session.protocol), address, oomClass, session.id)) return null;
  }
  if (address === null) {
    session.replyNow(encode.error(errors.SLOT_NOT_SERVED));
    return { hold: undefined };
  }
  const write = session.track(new ConvergingWrite(ctx, session, writePayload(ctx, args, raw), address, targets, undeclared, oomClass));
  ctx.ring?.track(write.settled);
  write.start();
  return { hold: placement.phase === 'read-new' ? write.settled : undefined };
}

/**
 * Under the replication carry nothing converges: every write goes to A alone and A's stream carries
 * it (follow.ts). While some proxy may read from B (read-new, or a read barrier heard), a write of
 * a moving key, or a script's, is answered once its node's follower has applied through A's offset
 * after it (`onB`). A client's transaction runs on its own connection to A, as without a migration.
 */
function replicatedWrite(carry: CarryState, placement: Placement, moves: boolean, undeclared: boolean, inTransaction: boolean): ConvergingStart | null {
  if (inTransaction || (!moves && !undeclared)) return null;
  const onB = placement.phase === 'read-new' || !carry.answerAfterA;
  return { carry, onB };
}

/** The change feeds can carry the write now: its keys' node in B (`to`) is reachable as far as the proxy knows. */
function feedsCarry(ctx: ProxyContext, to: string): boolean {
  return ctx.changes !== null && ctx.changes.reachesSideB(to);
}

/**
 * The write as sent inside the converging MULTI, or to A alone under the replication carry. An
 * EVALSHA of a script the proxy knows is sent as EVAL of its body: inside MULTI a NOSCRIPT would
 * only show in EXEC's reply, too late to heal (and the same payload is what `done` may run again on
 * B, whose cache may not hold it either); a carried write is not a script call that heals either.
 */
export function writePayload(ctx: ProxyContext, args: Buffer[], raw: Buffer | null): Buffer {
  if (args.length >= 3 && args[0].length === 7 && args[0].toString('latin1').toLowerCase() === 'evalsha') {
    const body = ctx.scripts.get(args[1]);
    if (body !== undefined) return encode.command([EVAL, body, ...args.slice(2)]);
  }
  return raw ?? encode.command(args);
}

const EVAL = Buffer.from('EVAL');
