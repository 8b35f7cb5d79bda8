/**
 * `PROXY MIGRATION PHASE <phase>` and `PROXY MIGRATION STATUS`: the migration switched and read
 * over RESP. A phase set here lasts until the next reload (SIGHUP) or restart, which take the
 * phase from the config file; write the file too when the change must stick. Under --workers a
 * switch through one worker switches every worker (cmd/worker-phase.ts).
 */
import { MIGRATION_PHASES, MigrationPhase } from '../../config/schema';
import { ProxyContext, WorkerPhaseRelay, WorkerSwitch } from '../context';
import { log } from '../telemetry/log';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { CATCH_UP_WAIT_MS, coverageAwaited, coverageProblem, fenceRingB, phaseChangeProblem } from './fence';
import { closeSideA } from './closing';
import { startsChangeFeeds } from './feed-permissions';
import { carryProblem } from './carry-choice';
import { fleetCatchingUp, raiseReadBarrier } from './read-barrier';
import { NodeCall, ProxyRecord, describeProxies, isBehind, readFleet } from './fleet';
import { Placement } from '../../sharding/migration';
import { Ring } from '../../sharding/ring';
import { ClusterKeySpace } from '../../sharding/cluster-key-space';
import { request } from '../backend/request';
import { decodeReply, errorText } from '../resp/decode-reply';

const FENCE_TIMEOUT_MS = 5000;
const USAGE = errors.PROXY_COMMAND_USAGE;

export function isProxyCommand(name: Buffer): boolean {
  return name.length === 5 && name.toString('latin1').toLowerCase() === 'proxy';
}

export function proxyCommand(ctx: ProxyContext, args: Buffer[]): Buffer | Promise<Buffer> {
  const words = args.slice(1).map((a) => a.toString('utf8'));
  if (words.length < 2 || words[0].toLowerCase() !== 'migration') return encode.error(USAGE);
  const ring = ctx.ring;
  if (ring === null) return encode.error(errors.MIGRATION_NEEDS_RING);
  const sub = words[1].toLowerCase();
  if (sub === 'status' && words.length === 2) return encode.bulk(statusText(ctx));
  if (sub === 'phase' && words.length === 3) {
    const phase = words[2].toLowerCase();
    if (!(MIGRATION_PHASES as readonly string[]).includes(phase)) return encode.error(USAGE);
    if (!ring.placement.migrating) return encode.error(errors.NO_MIGRATION);
    return ctx.switchWorkers === undefined ? switchPhase(ctx, phase as MigrationPhase) : switchEveryWorker(ctx.switchWorkers, phase);
  }
  return encode.error(USAGE);
}

/** The switch in this process alone: null once switched, else why not (a relayed switch, cmd/worker-phase.ts). */
export async function switchPhaseHere(ctx: ProxyContext, phase: string): Promise<string | null> {
  if (!(MIGRATION_PHASES as readonly string[]).includes(phase)) return `unknown phase ${phase}`;
  if (ctx.ring === null || !ctx.ring.placement.migrating) return errors.NO_MIGRATION;
  return errorText(await switchPhase(ctx, phase as MigrationPhase));
}

/**
 * Under --workers every worker is a proxy of the fleet: each runs its own switch (its own checks,
 * barriers and fence), as separate proxies switched together would; OK once all have switched.
 */
async function switchEveryWorker(relay: WorkerPhaseRelay, phase: string): Promise<Buffer> {
  let outcomes: WorkerSwitch[];
  try {
    outcomes = await relay(phase);
  } catch (err) {
    return encode.error(errors.migrationPhaseRefused(`cannot reach the other workers of this proxy: ${err instanceof Error ? err.message : String(err)}`));
  }
  const refused = outcomes.filter((o) => o.problem !== null);
  if (refused.length === 0) return encode.OK;
  const why = refused.map((o) => `worker ${o.pid} (${o.id}): ${o.problem!.replace(/^ERR slotproxy: /, '')}`);
  return encode.error(errors.migrationPhaseRefused(`${outcomes.length - refused.length} of ${outcomes.length} workers switched; ${why.join('; ')}`));
}

/** `waited`: the follows were waited for once already (CATCH_UP_WAIT_MS), so a coverage problem refuses now. */
function switchPhase(ctx: ProxyContext, phase: MigrationPhase, waited = false): Buffer | Promise<Buffer> {
  const ring = ctx.ring!;
  const current = ring.placement;
  const next = current.withPhase(phase);
  const problem = phaseChangeProblem(current, next) ?? coverageProblem(ctx.changes, current, next);
  if (problem !== null && !waited && phaseChangeProblem(current, next) === null && ctx.changes?.catchingUp() === true) {
    // Only follows catching up (a full sync under way, a link resuming): waited for, then switched.
    return coverageAwaited(ctx.changes, () => ring.placement, (p) => p.withPhase(phase), CATCH_UP_WAIT_MS).then((why) =>
      why === null ? switchPhase(ctx, phase, true) : encode.error(errors.migrationPhaseRefused(why)),
    );
  }
  if (problem !== null) return encode.error(errors.migrationPhaseRefused(problem));
  const swap = (): Buffer => {
    ring.swap(next);
    log.info({ from: current.phase, to: phase }, 'migration phase switched over RESP');
    return encode.OK;
  };
  if (startsChangeFeeds(current, next)) {
    // The change feeds' user must read every key of side A first.
    return carryProblem(ctx.pool, next, ctx.ring?.carry.replication === true ? 'replication' : 'feeds', FENCE_TIMEOUT_MS).then((why) => (why === null ? swap() : encode.error(errors.migrationPhaseRefused(why))));
  }
  if (readsBFirst(current, next)) return toReadNew(ctx, next, swap);
  if (phase !== 'done' || current.phase === 'done') return swap();
  return toDone(ctx, next, swap);
}

/** True when `next` reads from side B and `current` did not: the fleet's read barrier comes first. */
export function readsBFirst(current: Placement, next: Placement): boolean {
  return next.phase === 'read-new' && next.to !== null && current.phase !== 'read-new' && current.phase !== 'done';
}

/**
 * Before this proxy reads from B, every proxy of the fleet answers writes only once B holds them,
 * and every write it answered before is on B (read-barrier.ts). Throws, naming why, when that
 * cannot be confirmed within FENCE_TIMEOUT_MS.
 */
export async function raiseFleetReadBarrier(ctx: ProxyContext, next: Placement): Promise<void> {
  const fleet = await fleetOf(ctx, next);
  // On the replication carry, a proxy whose follow is in a full sync acknowledges once it is live.
  const catchingUp = async (missing: readonly ProxyRecord[]): Promise<boolean> => ctx.ring?.carry.replication === true && fleetCatchingUp(await fleetOf(ctx, next), missing);
  await raiseReadBarrier(ctx, next, fleet, FENCE_TIMEOUT_MS, catchingUp);
}

async function toReadNew(ctx: ProxyContext, next: Placement, swap: () => Buffer): Promise<Buffer> {
  try {
    await raiseFleetReadBarrier(ctx, next);
  } catch (err) {
    return encode.error(errors.migrationPhaseRefused(`not every proxy confirmed that the writes it answered are on side B, phase unchanged: ${err instanceof Error ? err.message : String(err)}`));
  }
  return swap();
}

/**
 * `done` writes to ring B alone, so it waits for the whole fleet: refused while any live proxy of
 * the ring (this one included) still double-writes or has no migration, since such a proxy would
 * go on writing to A; then ring B is fenced, then the phase switches.
 */
async function toDone(ctx: ProxyContext, next: Placement, swap: () => Buffer): Promise<Buffer> {
  const refuse = (why: string): Buffer => encode.error(errors.migrationPhaseRefused(why));
  let fleet: ProxyRecord[];
  try {
    fleet = await fleetOf(ctx, next);
  } catch (err) {
    return refuse(`cannot read the proxies of the ring, phase unchanged: ${err instanceof Error ? err.message : String(err)}`);
  }
  // This proxy's own record may not show a switch it has just made; its placement does.
  const self = ctx.changes?.selfId() ?? '';
  const own = ctx.ring?.placement.phase ?? null;
  const behind = fleet.filter((r) => (r.id === self && own !== null ? isBehind(own, 'read-new') : isBehind(r.phase, 'read-new')));
  if (behind.length > 0) return refuse(`live proxies are behind read-new: ${describeProxies(behind)}`);
  try {
    // Every proxy stops writing to A (its feeds caught up), then B is fenced.
    await closeSideA(ctx, next, ctx.changes?.selfId() ?? '', fleet, FENCE_TIMEOUT_MS);
  } catch (err) {
    return refuse(`cannot close side A, phase unchanged: ${err instanceof Error ? err.message : String(err)}`);
  }
  try {
    await fenceRingB(ctx.pool, next, FENCE_TIMEOUT_MS);
  } catch (err) {
    return refuse(`cannot fence ring B, phase unchanged: ${err instanceof Error ? err.message : String(err)}`);
  }
  return swap();
}

/** Every live proxy of the ring, read over this proxy's own back-end connections. */
export function fleetOf(ctx: ProxyContext, placement: Placement): Promise<ProxyRecord[]> {
  return readFleet(fleetCall(ctx), placement.from.masters());
}

/** Reads the fleet (CLIENT LIST of ring A's nodes) over this proxy's own back-end connections. */
function fleetCall(ctx: ProxyContext): NodeCall {
  return async (addr, args) => {
    const frame = await request(ctx.pool.connection(addr, 0), args, FENCE_TIMEOUT_MS);
    const err = errorText(frame);
    if (err !== null) throw new Error(`${addr}: ${err}`);
    return decodeReply(frame, true);
  };
}

function statusText(ctx: ProxyContext): string {
  const p = ctx.ring?.placement;
  if (p === undefined) return '';
  const nodes = (r: Ring): string => r.nodes.map((n) => `${n.name}=${n.addr}`).join(',');
  const lines = [`phase:${p.phase ?? 'none'}`];
  if (p.from instanceof Ring) lines.push(`hash:${p.from.hash}`, `from:${nodes(p.from)}`);
  else if (p.from instanceof ClusterKeySpace) lines.push(`from_cluster:${p.from.seeds.join(',')}`, `from_masters:${p.from.masters().join(',')}`);
  if (p.to instanceof Ring) lines.push(`to:${nodes(p.to)}`, `to_hash:${p.to.hash}`);
  else if (p.to instanceof ClusterKeySpace) lines.push(`to_cluster:${p.to.seeds.join(',')}`, `to_masters:${p.to.masters().join(',')}`);
  const feeds = ctx.changes?.states() ?? [];
  if (feeds.length > 0) lines.push(`feeds:${feeds.join(',')}`);
  const copiers = ctx.changes?.copiers() ?? [];
  if (copiers.length > 0) lines.push(`copiers:${copiers.join(',')}`);
  const open = ctx.changes?.uncovered() ?? [];
  if (open.length > 0) lines.push(`uncovered:${open.join('; ')}`);
  return lines.join('\r\n') + '\r\n';
}
