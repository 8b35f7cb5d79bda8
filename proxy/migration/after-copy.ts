/**
 * Read-your-writes for writes whose changed keys the proxy cannot name (a script or function
 * writing keys it builds from its arguments): while writes converge, the client's reply waits
 * until every change made on the node before the reply came has reached side B (the node's change
 * feed barrier, change-copier.ts). In read-new the session's next requests wait too, so a
 * pipelined read from B sees the write.
 */
import { ProxyContext } from '../context';
import { ReplyOwner, ReplySlot } from '../client/reply-slot';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';

/** Script calls that can write keys they do not declare (EVAL_RO and FCALL_RO cannot write). */
const UNDECLARED_WRITERS: ReadonlySet<string> = new Set(['eval', 'evalsha', 'fcall']);

export function writesUndeclared(name: string): boolean {
  return UNDECLARED_WRITERS.has(name);
}

/** True when such a write must wait for its node's changes to reach side B. */
export function mustWaitForCopy(ctx: ProxyContext): boolean {
  return ctx.changes !== null && ctx.ring?.placement.converges === true;
}

/**
 * Whether EXEC's reply waits until its node's changes are on side B: a transaction with a script
 * (it may write keys it does not name), or, under the replication carry (nothing is copied with
 * the write itself), any writing transaction while some proxy may read from B.
 */
export function execWaitsForB(ctx: ProxyContext, writes: boolean, undeclared: boolean): boolean {
  const carry = ctx.ring?.carry;
  if (carry?.replication === true) return mustWaitForCopy(ctx) && (writes || undeclared) && (ctx.ring?.placement.phase === 'read-new' || !carry.answerAfterA);
  return undeclared && mustWaitForCopy(ctx);
}

/**
 * `frame`, the reply of a write that ran on `address`, once the node's changes are on side B; an
 * error naming the node when they could not be copied (the write did run, as with a converging
 * write whose copy failed).
 */
export async function afterCopy(ctx: ProxyContext, address: string, frame: Buffer): Promise<Buffer> {
  const after = ctx.changes?.after(address) ?? null;
  if (after === null) return frame;
  // The replication carry in double-write: the reply also goes once no proxy reads from B (as a carried write's).
  const carry = ctx.ring?.carry;
  const wait = carry?.replication === true && ctx.ring?.placement.phase === 'double-write' ? Promise.race([after, carry.answeredAfterA().then(() => null)]) : after;
  const problem = await wait;
  if (problem === null) return frame;
  ctx.stats.backendErrors++;
  return encode.error(errors.migrationCopyFailed(address, problem));
}

/** Where the reply of a command sent on its own will come from (ForwardedCommand's node). */
export interface SentCommand extends ReplySlot {
  readonly node: string;
  start(): void;
}

/**
 * Sends a command whose reply is held until its node's changes are on side B. `make` builds the
 * command for an owner standing in for the session; the session's own slot takes the held reply.
 * Resolves once the client's reply is known.
 */
export function sendHeldUntilCopied(
  ctx: ProxyContext,
  session: ReplyOwner & { track<T extends ReplySlot>(slot: T): T },
  make: (owner: ReplyOwner) => SentCommand,
): Promise<void> {
  const held = session.track(new ReplySlot(session));
  return new Promise((resolve) => {
    const stand: ReplyOwner = {
      id: session.id,
      protocol: session.protocol,
      readsMasterOnly: session.readsMasterOnly,
      onSlotFilled: (slot) => {
        void afterCopy(ctx, command.node, slot.reply as Buffer).then((frame) => {
          held.complete(frame);
          resolve();
        });
      },
    };
    const command = make(stand);
    command.start();
  });
}
