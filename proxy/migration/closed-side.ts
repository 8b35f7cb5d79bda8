/**
 * A proxy that starts without `migration:` in front of nodes a migration has closed would serve
 * side A again: the fleet's proxies in `done` write to side B alone, so A's keys are stale. The
 * evidence is the fleet itself (fleet.ts): live proxies registered on these nodes in `done`, naming
 * a side B (side-fingerprint.ts) other than the back end this proxy is starting with. A proxy
 * starting with that side B as its back end (`slotproxy migrate finish` wrote it; a ring grown on
 * the same nodes, say) is not refused.
 */
import { BackendPool } from '../backend/pool';
import { request } from '../backend/request';
import { decodeReply, errorText } from '../resp/decode-reply';
import { KeySpace } from '../../sharding/key-space';
import { describeProxies, readFleet } from './fleet';
import { sideFingerprint } from './side-fingerprint';

/** Why `serving`, on `nodes`, would serve a closed side A; null when it would not (or no node answers). */
export async function closedSideProblem(pool: BackendPool, nodes: readonly string[], serving: KeySpace, timeoutMs: number): Promise<string | null> {
  const call = async (addr: string, args: string[]): Promise<unknown> => {
    const frame = await request(pool.connection(addr, 0), args, timeoutMs);
    const err = errorText(frame);
    if (err !== null) throw new Error(`${addr}: ${err}`);
    return decodeReply(frame, true);
  };
  const fleet = await readFleet(call, nodes).catch(() => []);
  const mine = sideFingerprint(serving);
  const closing = fleet.filter((p) => p.phase === 'done' && p.to !== '-' && p.to !== mine);
  if (closing.length === 0) return null;
  return (
    `refused: these nodes are side A of a migration past done (live proxies ${describeProxies(closing)} write to its side B alone), ` +
    'so their keys are stale; start with side B as the back end (slotproxy migrate finish -c FILE writes it), or with the migration: block in done'
  );
}
