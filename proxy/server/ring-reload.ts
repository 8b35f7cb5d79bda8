import { isDeepStrictEqual } from 'node:util';
import { Config } from '../../config/schema';
import { masterNames, migrationAt, ringAt } from '../../sharding/master-addresses';
import { NO_MASTERS } from '../sentinel/start';
import { ProxyContext } from '../context';
import { Placement } from '../../sharding/migration';
import { log } from '../telemetry/log';
import { CATCH_UP_WAIT_MS, coverageAwaited, coverageProblem, fenceRingB, phaseChangeProblem, sideBFenced } from '../migration/fence';
import { closeSideA } from '../migration/closing';
import { fleetOf, raiseFleetReadBarrier, readsBFirst } from '../migration/admin';
import { carryBeforeMigrating } from '../migration/carry';
import { startsChangeFeeds } from '../migration/feed-permissions';
import { CarryChoice, carryChangeProblem, carryProblem, chooseCarry } from '../migration/carry-choice';
import { finishedPlacement } from './finish-reload';
import { ClusterKeySpace } from '../../sharding/cluster-key-space';
import type { RingRouter } from '../ring/router';

const FENCE_TIMEOUT_MS = 5000;
/** Reloaded configs whose new Sentinel masters were asked for already (applied once the answers are in). */
const asked = new WeakSet<Config>();
const CLUSTER_LOAD_TIMEOUT_MS = 10_000;
/** TRYAGAIN, CLUSTERDOWN and lost nodes of a migration's cluster side: retried this long (cluster mode's default). */
export const CLUSTER_RETRY_WINDOW_MS = 5000;

/**
 * A reloaded config's ring and migration (SIGHUP): the new placement is built first (a bad one
 * throws and changes nothing), then swapped in whole; into `done`, only once side B is fenced
 * (proxy/migration/fence.ts). After done, a config with side B as its back end and no
 * `migration:` finishes the migration (./finish-reload.ts; true is returned then), a ring becoming
 * a cluster-mode proxy when B is a cluster. Other mode switches need a restart, and so does a
 * `migration:` block added to a cluster-mode proxy started without one (its router is a plain
 * slot router then).
 */
export function applyRingReload(ctx: ProxyContext, current: Config, next: Config): boolean {
  const ring = ctx.ring;
  // After done, a config whose back end is side B and has no migration: (`migrate finish`).
  if (ring !== null) {
    const sentinel = ctx.sentinel;
    const finished = finishedPlacement(ctx, next, sentinel === null ? NO_MASTERS : (name: string) => sentinel.addressOf(name));
    if (finished !== null) {
      finishMigration(ctx, ring, finished, next);
      return true;
    }
  }
  if (current.mode !== next.mode) throw new Error(`mode changed from ${current.mode} to ${next.mode}: restart the proxy for that (only a proxy in done switches live, to side B: slotproxy migrate finish)`);
  applyPlacementReload(ctx, current, next);
  return false;
}

/** Side B alone: the proxy already reads and writes it alone in done, so no key moves and no client notices. */
function finishMigration(ctx: ProxyContext, ring: RingRouter, placement: Placement, next: Config): void {
  const before = ring.placement;
  if (before === placement) return;
  const fromMode = ctx.mode;
  // A cluster A's slot map is no longer routed by (its nodes may go away now).
  if (ctx.topology !== null && before.from instanceof ClusterKeySpace) ctx.topology.stop();
  ring.swap(placement);
  ctx.mode = next.mode;
  if (next.mode === 'cluster') Object.assign(ctx.forward, { maxRedirects: next.cluster.maxRedirects, retryWindowMs: next.cluster.retryWindowMs });
  log.info({ from: before.phase ?? 'none', mode: next.mode, wasMode: fromMode }, 'migration finished: serving side B alone');
}

/** The ring and migration part of a reload that keeps the mode (see applyRingReload). */
function applyPlacementReload(ctx: ProxyContext, current: Config, next: Config): void {
  const ring = ctx.ring;
  const clusters = ctx.clusters;
  if (ring === null || clusters === null) {
    if (next.migration !== undefined) throw new Error('migration: in cluster mode takes effect at start: restart the proxy with it');
    return;
  }
  const to = next.migration?.to;
  if (to !== undefined && 'cluster' in to && !clusters.has(to.cluster.seeds)) {
    // A migration into a cluster: its slot map first; until then the current placement stays.
    clusters.load(to.cluster.seeds, CLUSTER_LOAD_TIMEOUT_MS).then(
      () => {
        ctx.forward.retryWindowMs = Math.max(ctx.forward.retryWindowMs, CLUSTER_RETRY_WINDOW_MS);
        applyPlacementReload(ctx, current, next);
      },
      (err: unknown) => log.error({ err: err instanceof Error ? err.message : String(err) }, 'cannot load the migration\'s cluster; the placement stays'),
    );
    return;
  }
  const sentinel = ctx.sentinel;
  if (next.mode === 'ring') {
    const was = current.mode === 'ring' ? current.ring : undefined;
    if (!isDeepStrictEqual(was?.sentinels, next.ring.sentinels) || !isDeepStrictEqual(was?.sentinel, next.ring.sentinel)) {
      throw new Error('ring.sentinels and ring.sentinel take effect at start: restart the proxy for that');
    }
    // Masters the reloaded config names for the first time (a ring B grown onto new ones): asked first.
    const unknown = masterNames(next.ring, next.migration).filter((n) => sentinel?.addressOf(n) === undefined);
    if (sentinel !== null && unknown.length > 0 && !asked.has(next)) {
      asked.add(next);
      void sentinel.learn(unknown).then(() => {
        try {
          applyPlacementReload(ctx, current, next);
        } catch (err) {
          log.error({ err: err instanceof Error ? err.message : String(err) }, 'the reloaded ring cannot be placed; the placement stays');
        }
      });
      return;
    }
  }
  const at = sentinel === null ? NO_MASTERS : (name: string) => sentinel.addressOf(name);
  const topology = ctx.topology;
  const placement =
    next.mode === 'ring'
      ? Placement.fromConfig(ringAt(next.ring, at), migrationAt(next.migration, at), undefined, clusters.ownersFor)
      : topology !== null
        ? Placement.forCluster(next.cluster.seeds, topology, next.migration, clusters.ownersFor)
        : null;
  if (placement === null) return;
  ring.carry.spool = next.migration?.spool ?? null;
  const before = ring.placement;
  const problem = phaseChangeProblem(before, placement) ?? carryChangeProblem(ring, before, next.migration?.carry);
  const uncovered = coverageProblem(ctx.changes, before, placement);
  if (problem === null && uncovered !== null && ctx.changes?.catchingUp() === true) {
    // Only follows catching up (a full sync under way, a link resuming): waited for, then applied.
    log.info({ uncovered }, `reload: ${placement.phase ?? 'none'} waits for the follows of side A to catch up`);
    void coverageAwaited(ctx.changes, () => before, () => placement, CATCH_UP_WAIT_MS).then((why) => {
      if (ring.placement !== before) return log.warn('reload: the placement changed while this reload waited for the follows; it is not applied');
      if (why !== null) return log.error({ err: `migration.phase: ${why}` }, `reload: ${placement.phase ?? 'none'} refused; the migration phase stays ${before.phase ?? 'none'}`);
      applyCoveredPlacement(ctx, ring, before, placement, next);
    });
    return;
  }
  if ((problem ?? uncovered) !== null) throw new Error(`migration.phase: ${problem ?? uncovered}`);
  applyCoveredPlacement(ctx, ring, before, placement, next);
}

/** A reloaded placement checked (phase order, carry, coverage): swapped in, after what it needs first. */
function applyCoveredPlacement(ctx: ProxyContext, ring: RingRouter, before: Placement, placement: Placement, next: Config): void {
  const swap = (): void => {
    ring.swap(placement);
    if (before.phase !== placement.phase) log.info({ from: before.phase ?? 'none', to: placement.phase ?? 'none' }, 'migration phase reloaded');
  };
  const failed = (err: unknown): void => {
    log.error({ err: err instanceof Error ? err.message : String(err) }, 'cannot confirm that every proxy\'s writes are on side B; the migration phase stays');
  };
  if (placement.phase !== 'done' || before.phase === 'done' || placement.to === null) {
    // A migration added: side B gets A's function libraries and the known scripts first.
    const start = (): void => {
      const carrying = before.to === null && placement.to !== null ? carryBeforeMigrating(ctx, placement) : null;
      // Into read-new: no proxy of the fleet answers a write before B holds it (migration/read-barrier.ts).
      if (readsBFirst(before, placement)) void (carrying ?? Promise.resolve()).then(() => raiseFleetReadBarrier(ctx, placement)).then(swap, failed);
      else if (carrying !== null) void carrying.then(swap);
      else swap();
    };
    // A migration dropped (back to side A alone): refused once some proxy of the fleet is in done.
    if (before.to !== null && placement.to === null) {
      void sideBFenced(ctx.pool, before, FENCE_TIMEOUT_MS).then(
        (fenced) => {
          if (!fenced) return start();
          log.error(
            { problem: 'side B is fenced: a proxy of the fleet is in done and writes to B alone, so side A is stale; switch this proxy to done first (slotproxy migrate phase done -c FILE)' },
            `reload: a config without migration: refused in ${before.phase ?? 'none'}; the migration phase stays`,
          );
        },
        (err: unknown) => log.error({ err: err instanceof Error ? err.message : String(err) }, 'reload: cannot tell whether side B is fenced; the migration stays'),
      );
      return;
    }
    if (!startsChangeFeeds(before, placement)) return start();
    // Into double-write: a new migration's carry is chosen (migration/carry-choice.ts), then what it needs is checked.
    const refused = (problem: string): void => log.error({ problem }, `reload: ${placement.phase ?? ''} refused; the migration phase stays ${before.phase ?? 'none'}`);
    const choosing: Promise<CarryChoice> =
      before.to === null ? chooseCarry(ctx.pool, placement, next.migration?.carry, FENCE_TIMEOUT_MS) : Promise.resolve({ carry: ring.carry.replication ? 'replication' : 'feeds', why: ring.carry.why });
    void choosing.then(
      (choice) =>
        carryProblem(ctx.pool, placement, choice.carry, FENCE_TIMEOUT_MS).then((problem) => {
          if (problem !== null) return refused(problem);
          ring.carry.replication = choice.carry === 'replication';
          ring.carry.why = choice.why;
          start();
        }),
      (err: unknown) => refused(err instanceof Error ? err.message : String(err)),
    );
    return;
  }
  // Into done: every proxy stops writing to A (migration/closing.ts), then B is fenced; until then this proxy keeps double-writing.
  fleetOf(ctx, placement)
    .then((fleet) => closeSideA(ctx, placement, ctx.changes?.selfId() ?? '', fleet, FENCE_TIMEOUT_MS))
    .then(() => fenceRingB(ctx.pool, placement, FENCE_TIMEOUT_MS))
    .then(swap, (err: unknown) => {
      log.error({ err: err instanceof Error ? err.message : String(err) }, 'cannot close side A or fence ring B; the migration phase stays');
    });
}
