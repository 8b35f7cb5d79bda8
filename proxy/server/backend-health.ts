/**
 * The back ends' health (GET /health/backends, `slotproxy_backend_up`): every node the proxy
 * routes to (a ring's servers, a cluster's masters, a migration's other side) asked for PING, and
 * in cluster mode the slots that have no master. Not the proxy's readiness (./readiness.ts): a
 * proxy with a node down still serves every other node's keys.
 */
import { ProxyContext } from '../context';
import { request } from '../backend/request';
import { errorText } from '../resp/decode-reply';
import { SLOT_COUNT } from '../../sharding/slot';
import type { BackendHealth, NodeHealth } from '../telemetry/metrics';

const PING_TIMEOUT_MS = 1000;

/** The nodes the proxy routes to now: the ring's (both sides during a migration), else the cluster's masters and a migration's side B. */
export function routedNodes(ctx: ProxyContext): string[] {
  const placement = ctx.ring?.placement;
  if (ctx.topology === null) return placement?.allAddresses() ?? [...ctx.router.masters()];
  return [...new Set([...ctx.topology.current.masters.map((m) => m.address), ...(placement?.to?.masters() ?? [])])];
}

export async function backendHealth(ctx: ProxyContext): Promise<BackendHealth> {
  const nodes = await Promise.all(routedNodes(ctx).map((addr) => ping(ctx, addr)));
  const slotsWithoutMaster = ctx.topology === null ? 0 : SLOT_COUNT - ctx.topology.current.servedSlots;
  return { nodes, slotsWithoutMaster };
}

async function ping(ctx: ProxyContext, addr: string): Promise<NodeHealth> {
  try {
    const err = errorText(await request(ctx.pool.connection(addr, 0), ['PING'], PING_TIMEOUT_MS));
    return { addr, up: err === null, error: err };
  } catch (e) {
    return { addr, up: false, error: e instanceof Error ? e.message : String(e) };
  }
}
