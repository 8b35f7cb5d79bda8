import { ProxyContext } from '../context';
import * as errors from '../resp/errors';

/**
 * Commands whose writes cannot be followed by a copy to ring B are refused for keys that move,
 * while a migration converges (double-write, read-new): a transaction (its writes run at EXEC on
 * one connection) and a blocking command (it may write long after it was sent). Keys that stay on
 * their node are not affected. Null when `name` may run.
 */
export function movingKeysRefusal(ctx: ProxyContext, name: string, args: Buffer[], positions: readonly number[]): string | null {
  const placement = ctx.ring?.placement;
  if (placement === undefined || !placement.converges) return null;
  for (const p of positions) {
    if (placement.copyTarget(args[p]) !== null) {
      return errors.unsupported(name, 'its keys move to another node in the running ring migration; run it before double-write or after done');
    }
  }
  return null;
}
