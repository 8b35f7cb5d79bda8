/**
 * Tells client-side caching (tracking/) when where reads go has changed, so that tracking clients
 * drop what they hold: a slot map whose owners changed (a failover, a reshard), a MOVED, a ring
 * placement swapped (an ejected node, a migration phase), a lost connection to a node.
 */
import { ProxyContext } from '../context';
import { ClusterTopology } from '../cluster/topology';

type Routing = Pick<ProxyContext, 'ring' | 'topology'>;

/** The nodes reads may go to now: each needs an invalidation feed. */
export function readNodes(parts: Routing): readonly string[] {
  if (parts.ring !== null) return parts.ring.placement.allAddresses();
  return parts.topology?.masterAddresses() ?? [];
}

export function watchPlacement(ctx: ProxyContext): void {
  const caching = ctx.caching;
  const watch = (topology: ClusterTopology): void => {
    let owners = topology.current.ownersKey();
    topology.onChange((map) => {
      const next = map.ownersKey();
      if (next === owners) return;
      owners = next;
      caching.placementChanged('slot owners changed');
    });
    topology.onMoved((slot, address) => caching.placementChanged(`MOVED ${slot} ${address}`));
  };
  if (ctx.topology !== null) watch(ctx.topology);
  ctx.clusters?.onLoaded(watch);
  ctx.ring?.onSwap(() => caching.placementChanged('placement swapped'));
  ctx.pool.onConnectionLost((address, reason) => caching.placementChanged(`connection to ${address} lost: ${reason}`));
}
