import { Config } from '../../config/schema';
import { ProxyContext } from '../context';
import { Placement } from '../../sharding/migration';
import { log } from '../log';

/**
 * A reloaded config's ring and migration (SIGHUP): the new placement is built first (a bad one
 * throws and changes nothing), then swapped in whole. Switching modes needs a restart.
 */
export function applyRingReload(ctx: ProxyContext, current: Config, next: Config): void {
  if (current.mode !== next.mode) throw new Error(`mode changed from ${current.mode} to ${next.mode}: restart the proxy for that`);
  if (ctx.ring === null || next.mode !== 'ring') return;
  const placement = Placement.fromConfig(next.ring, next.migration);
  const before = ctx.ring.placement;
  ctx.ring.swap(placement);
  if (before.phase !== placement.phase || before.to !== null || placement.to !== null) {
    log.info({ from: before.phase ?? 'none', to: placement.phase ?? 'none' }, 'ring placement reloaded');
  }
}
