/**
 * The end of a migration on SIGHUP: a proxy in `done` reloads a config without `migration:` whose
 * back end is side B (what `slotproxy migrate finish` writes). The proxy already reads and writes
 * B alone in `done`, so it switches by routing to B alone (Placement(B, null, null)): nothing moves,
 * no client is disconnected, and a ring migrated into a cluster becomes a cluster-mode proxy
 * (ctx.mode, the command policy, INFO's proxy_mode) without a restart.
 *
 * A config without `migration:` that names side A again is refused: B is fenced and took every
 * write since `done`, so A is stale (a restart with it is refused too: migration/closed-mark.ts).
 */
import { Config } from '../../config/schema';
import { ProxyContext } from '../context';
import { KeySpace } from '../../sharding/key-space';
import { ClusterKeySpace } from '../../sharding/cluster-key-space';
import { Placement, ringFromConfig } from '../../sharding/migration';
import { Ring } from '../../sharding/ring';
import { MasterAddresses, ringAt } from '../../sharding/master-addresses';

/** Proxies that finished a migration: its two sides, so that a later reload naming A is refused too. */
const finishedSides = new WeakMap<ProxyContext, { a: KeySpace; b: KeySpace }>();

/** Whether the back end a config names (`named`) is `side`: one cluster (a seed of it among the side's seeds or masters now), or rings alike. */
export function sameBackEnd(named: KeySpace, side: KeySpace): boolean {
  const a = named;
  const b = side;
  if (a instanceof ClusterKeySpace && b instanceof ClusterKeySpace) return a.seeds.some((s) => b.seeds.includes(s) || b.masters().includes(s));
  if (a instanceof Ring && b instanceof Ring) {
    return (
      a.hashesLike(b) &&
      a.distribution === b.distribution &&
      a.nodes.length === b.nodes.length &&
      a.nodes.every((n, i) => n.name === b.nodes[i].name && n.addr === b.nodes[i].addr && n.weight === b.nodes[i].weight)
    );
  }
  return false;
}

/** Side A or B as the config's back end names it (a cluster by its seeds). */
function describe(side: KeySpace): string {
  if (side instanceof ClusterKeySpace) return `cluster ${side.seeds.join(', ')}`;
  return `ring ${side.masters().join(', ')}`;
}

/** No slot map: a cluster the config names is compared by its seeds alone (sameBackEnd). */
const NO_OWNERS = { ownerOf: () => null, masterAddresses: () => [], applyMoved: () => undefined, requestRefresh: () => undefined };

/** The back end `next` names, as a key space. */
function backEndOf(next: Config, at: MasterAddresses): KeySpace {
  if (next.mode === 'ring') return ringFromConfig(ringAt(next.ring, at));
  return new ClusterKeySpace(next.cluster.seeds, NO_OWNERS);
}

/**
 * The placement a reload of `next` finishes the migration with (side B alone), or null when `next`
 * is no such reload (it keeps a `migration:` block, or the proxy is not past `done`). Throws, with
 * the reason, when `next` would serve side A again or another back end.
 */
export function finishedPlacement(ctx: ProxyContext, next: Config, at: MasterAddresses): Placement | null {
  const running = ctx.ring?.placement;
  if (running === undefined) return null;
  // Finished already (an earlier reload): the same back end again changes nothing.
  const finished = finishedSides.get(ctx);
  if (next.migration !== undefined) {
    // A new migration may start from side B, never from the side A this proxy closed.
    if (finished !== undefined && sameBackEnd(backEndOf(next, at), finished.a)) return refuse(`done is final: this config migrates from side A (${describe(finished.a)}) again, which this proxy closed; side B (${describe(finished.b)}) is the back end now`);
    return null;
  }
  // In done, or finished (side B alone); a later migration from B not in done takes the usual path.
  const sides = running.to !== null ? (running.phase === 'done' ? { a: running.from, b: running.to } : undefined) : finished;
  if (sides === undefined) return null;
  const named = backEndOf(next, at);
  if (sameBackEnd(named, sides.b)) {
    finishedSides.set(ctx, sides);
    return finished !== undefined ? running : new Placement(sides.b, null, null);
  }
  if (sameBackEnd(named, sides.a)) {
    return refuse(`done is final: this config has no migration: and names side A (${describe(sides.a)}) again; side B (${describe(sides.b)}) is fenced and has taken every write since done, so A is stale. Write side B as the back end: slotproxy migrate finish -c FILE`);
  }
  return refuse(`after done, a config without migration: must name side B (${describe(sides.b)}) as its back end; it names ${describe(named)}: restart the proxy to serve another back end`);
}

function refuse(reason: string): never {
  throw new Error(reason);
}
