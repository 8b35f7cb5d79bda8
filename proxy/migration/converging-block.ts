/**
 * A blocking command (BLPOP, BLMOVE, BZPOPMIN, XREADGROUP ... BLOCK ...) in ring mode, where it
 * runs and what follows its reply, recomputed each time it is (re)started, since a phase switch
 * can change both while it blocks (proxy/ring/router.ts re-homes blocked commands on a swap).
 *
 * While a migration converges, a blocking write runs on ring A's node of its keys, like every
 * write, and its effect (the pop) is copied to ring B before the client gets the popped item:
 * SNAPSHOT after the reply, then APPLY (proxy/migration/converge.ts). The snapshot is not in the
 * pop's own MULTI (a blocked command cannot be queued), but it is taken after the pop, so it holds
 * the pop and every write before it; a later write's snapshot is numbered higher. That is all
 * convergence needs.
 *
 * When B was fenced (a proxy entered `done`) before it got the pop, ring A no longer counts: the
 * command runs again on B, now the only ring, and B's answer is the client's, so nothing is
 * popped twice (the item taken from A is still in B, and is popped there once) or lost.
 * When B cannot be reached, the client still gets its item (it is gone from A); the key is counted
 * as a back-end error and `slotproxy migrate copy` brings B up to date.
 */
import { ProxyContext } from '../context';
import { ClientSession } from '../client/client-session';
import { copyTargets, missedByFence, snapshotThenApply } from './copy-keys';
import { log } from '../telemetry/log';
import { afterCopy } from './after-copy';

export interface BlockingRoute {
  /** The node the command blocks on; null when none serves its keys. */
  address: string | null;
  /** Same value, same route: a swap that leaves it unchanged leaves the command where it blocks. */
  identity: string;
  /**
   * Turns the node's reply into the client's once the keys' new state reached ring B, or says to
   * run the command again on B alone; absent when nothing moves.
   */
  settle?: (frame: Buffer) => Promise<Buffer | { rerunOn: string }>;
}

export function blockingRoute(ctx: ProxyContext, session: ClientSession, keys: readonly Buffer[], readonly: boolean): () => BlockingRoute {
  return () => {
    const ring = ctx.ring;
    if (ring === null || keys.length === 0) return { address: null, identity: '' };
    const placement = ring.placement;
    const shard = placement.shardOf(keys[0]);
    const address = readonly ? placement.readAddress(shard) : placement.writeAddress(shard);
    const targets = readonly ? [] : copyTargets(placement, keys);
    if (targets.length === 0) return { address, identity: `${address}` };
    if (ring.carry.replication && address !== null) {
      // What a blocking pop took reaches B through A's stream (as a pop); while some proxy may read
      // from B, its reply waits until the node's follower applied it (as a carried write's), decided
      // when the reply comes, so a switch does not move the command while it blocks.
      const carry = ring.carry;
      const settle = async (frame: Buffer): Promise<Buffer> => (ring.placement.phase === 'read-new' || !carry.answerAfterA ? afterCopy(ctx, address, frame) : frame);
      return { address, identity: `${address}|replicated`, settle };
    }
    const settle = async (frame: Buffer): Promise<Buffer | { rerunOn: string }> => {
      const copy = snapshotThenApply(ctx, session.id, targets);
      ring.track(copy.then(
        () => undefined,
        () => undefined,
      ));
      try {
        const { snapshots, outcomes } = await copy;
        if (missedByFence(outcomes, snapshots) === 'none') return frame;
        return { rerunOn: targets[0].to };
      } catch (err) {
        ctx.stats.backendErrors++;
        log.warn({ node: targets[0].to, err: String(err) }, 'a blocking write ran on ring A but its copy to ring B failed; run slotproxy migrate copy');
        return frame;
      }
    };
    return { address, identity: `${address}|converging`, settle };
  };
}
