/**
 * Whether this proxy can serve every key now (GET /readyz): in cluster mode, once the slot map is
 * loaded and every one of the 16384 slots has a master; in ring mode (and for a migration's other
 * side), once every node answers PING. Null when ready, else the reason, naming what is missing.
 */
import { ProxyContext } from '../context';
import { request } from '../backend/request';
import { errorText } from '../resp/decode-reply';
import { SLOT_COUNT } from '../../sharding/slot';

const PING_TIMEOUT_MS = 1000;

export async function readinessProblem(ctx: ProxyContext): Promise<string | null> {
  const topology = ctx.topology;
  if (topology !== null) {
    const map = topology.current;
    if (map.masters.length === 0) return 'the cluster topology is not loaded yet';
    if (map.servedSlots < SLOT_COUNT) return `${SLOT_COUNT - map.servedSlots} of ${SLOT_COUNT} slots have no master`;
  }
  // Nodes the proxy reaches without a slot map to vouch for them: the ring's, and a migration's other side.
  const placement = ctx.ring?.placement;
  const nodes = topology === null ? (placement?.allAddresses() ?? [...ctx.router.masters()]) : [...(placement?.to?.masters() ?? [])];
  const down = (
    await Promise.all(
      nodes.map(async (addr) => {
        try {
          const err = errorText(await request(ctx.pool.connection(addr, 0), ['PING'], PING_TIMEOUT_MS));
          return err === null ? null : `${addr} (${err})`;
        } catch (e) {
          return `${addr} (${e instanceof Error ? e.message : String(e)})`;
        }
      }),
    )
  ).filter((d): d is string => d !== null);
  return down.length === 0 ? null : `unreachable: ${down.join(', ')}`;
}
