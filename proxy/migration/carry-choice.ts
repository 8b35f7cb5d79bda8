/**
 * How side A's changes reach side B, decided once, when a migration begins (at start with a
 * `migration:` block, or on the reload that adds one), before double-write:
 *
 * - `migration.carry: replication`: every node of A is followed as a replica (follow.ts); a node
 *   that refuses it (PSYNC renamed, a user without +psync +replconf) refuses the migration.
 * - `migration.carry: feeds`: the change feeds and versioned copies (change-copier.ts).
 * - `migration.carry: auto`: replication where every node of A allows it (replication/probe.ts,
 *   no sync started), else the change feeds, saying which node refused and why. A node that cannot
 *   be asked now (down) does not decide: its follower reports it until it answers.
 * - unset: as `auto`.
 *
 * Every proxy of a fleet asks the same nodes with the same user, so they choose alike.
 */
import { BackendPool } from '../backend/pool';
import { Placement } from '../../sharding/migration';
import { MigrationCarry } from '../../config/schema';
import { probeReplication } from '../replication/probe';
import { log } from '../telemetry/log';
import { RingRouter } from '../ring/router';
import { checkFeedPermissionsAtStart, feedPermissionProblem, startsChangeFeeds } from './feed-permissions';
import { versionProblem } from './side-versions';

export interface CarryChoice {
  carry: 'feeds' | 'replication';
  /** Why, for INFO and the logs. */
  why: string;
}

/** The carry for a migration from `placement`'s side A; throws, naming the node, when `replication` is asked of a node that refuses it. */
export async function chooseCarry(pool: BackendPool, placement: Placement, configured: MigrationCarry | undefined, timeoutMs: number): Promise<CarryChoice> {
  if (configured === 'feeds') return { carry: 'feeds', why: 'migration.carry: feeds' };
  const opts = pool.linkOptions();
  // As the follower's link: READONLY is for replicas of a cluster, never sent to a master.
  const handshake = opts.handshake.filter((h) => !h.toString('latin1').toUpperCase().includes('READONLY'));
  const verdicts = await Promise.all(placement.from.masters().map((address) => probeReplication(address, { tls: opts.tls, handshake, timeoutMs })));
  const refused = verdicts.find((v) => v.kind === 'refused');
  for (const v of verdicts) if (v.kind === 'unknown') log.warn({ why: v.why }, 'cannot ask a node of side A whether it can be followed as a replica now');
  if (configured === 'replication') {
    if (refused !== undefined) throw new Error(`migration.carry: replication refused: ${refused.why}`);
    return { carry: 'replication', why: 'migration.carry: replication' };
  }
  // Unset is auto, and says so: an operator reading INFO may not know the default.
  const unset = configured === undefined ? 'auto (migration.carry unset): ' : '';
  if (refused === undefined) return { carry: 'replication', why: `${unset}every node of side A can be followed as a replica` };
  const why = `${unset}${refused.why}; the change feeds carry instead (migration.carry: feeds)`;
  log.warn({ why }, 'side A cannot be followed as a replica');
  return { carry: 'feeds', why };
}

/**
 * At start with a migration under way: decides its carry (on `ring.carry`), then checks what that
 * carry needs before the proxy serves (feed-permissions.ts), throwing with the reason.
 */
export async function decideCarryAtStart(pool: BackendPool, ring: RingRouter, configured: MigrationCarry | undefined, timeoutMs: number): Promise<void> {
  const placement = ring.placement;
  if (placement.to === null) return;
  const choice = await chooseCarry(pool, placement, configured, timeoutMs);
  ring.carry.replication = choice.carry === 'replication';
  ring.carry.why = choice.why;
  if (choice.carry === 'feeds') return checkFeedPermissionsAtStart(pool, placement, timeoutMs);
  if (!startsChangeFeeds(null, placement)) return;
  const problem = await versionProblem(pool, placement, timeoutMs);
  if (problem !== null) throw new Error(`migration.phase ${placement.phase ?? ''} refused: ${problem}`);
}

/** Before double-write on a reload or a switch: the problem that refuses it for `carry`, or null. */
export function carryProblem(pool: BackendPool, placement: Placement, carry: CarryChoice['carry'], timeoutMs: number): Promise<string | null> {
  return carry === 'feeds' ? feedPermissionProblem(pool, placement, timeoutMs) : versionProblem(pool, placement, timeoutMs);
}

/** A reload naming a carry other than the one of the migration under way: refused (the two carry differently). */
export function carryChangeProblem(ring: RingRouter, before: Placement, configured: MigrationCarry | undefined): string | null {
  if (before.to === null || configured === undefined) return null;
  const current: MigrationCarry = ring.carry.replication ? 'replication' : 'feeds';
  if (configured === current || configured === 'auto') return null;
  return `migration.carry ${configured}: the migration under way is carried by ${current} (${ring.carry.why}); a carry cannot change during a migration`;
}
