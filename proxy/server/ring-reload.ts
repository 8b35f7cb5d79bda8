import { Config } from '../../config/schema';
import { ProxyContext } from '../context';
import { Placement } from '../../sharding/migration';
import { log } from '../telemetry/log';
import { fenceRingB, phaseChangeProblem } from '../migration/fence';

const FENCE_TIMEOUT_MS = 5000;

/**
 * A reloaded config's ring and migration (SIGHUP): the new placement is built first (a bad one
 * throws and changes nothing), then swapped in whole; into `done`, only once ring B is fenced
 * (proxy/migration/fence.ts). Switching modes needs a restart.
 */
export function applyRingReload(ctx: ProxyContext, current: Config, next: Config): void {
  if (current.mode !== next.mode) throw new Error(`mode changed from ${current.mode} to ${next.mode}: restart the proxy for that`);
  const ring = ctx.ring;
  if (ring === null || next.mode !== 'ring') return;
  const placement = Placement.fromConfig(next.ring, next.migration);
  const before = ring.placement;
  const problem = phaseChangeProblem(before, placement);
  if (problem !== null) throw new Error(`migration.phase: ${problem}`);
  const swap = (): void => {
    ring.swap(placement);
    if (before.phase !== placement.phase) log.info({ from: before.phase ?? 'none', to: placement.phase ?? 'none' }, 'migration phase reloaded');
  };
  if (placement.phase !== 'done' || before.phase === 'done' || placement.to === null) {
    swap();
    return;
  }
  // Into done: ring B is fenced first; until then this proxy keeps double-writing.
  fenceRingB(ctx.pool, placement, FENCE_TIMEOUT_MS).then(swap, (err: unknown) => {
    log.error({ err: err instanceof Error ? err.message : String(err) }, 'cannot fence ring B; the migration phase stays');
  });
}
