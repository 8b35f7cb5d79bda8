/**
 * The steps every converging write shares (proxy/migration/converge.ts is the protocol): which of
 * a request's keys move, applying their snapshots on the new owners, and reading the fence's
 * answer. A single write, a transaction's EXEC and a blocking command each take their snapshots
 * their own way (inside the write's MULTI, inside EXEC, or right after the pop) and then meet here.
 */
import { ProxyContext } from '../context';
import { errorText } from '../resp/decode-reply';
import { Placement } from '../../sharding/migration';
import { KeySpace, SlotOwners } from '../../sharding/key-space';
import { ClusterKeySpace } from '../../sharding/cluster-key-space';
import { ApplyOutcome, Bookkeeping, Snapshot, applyCommand, bookkeepingOf, parseApply, parseSnapshot, snapshotCommand } from './converge';
import { sideRequest } from './side-request';

/** A key of the write whose owner in side B (`to`) differs from its node in side A (`from`). */
export interface CopyTarget {
  key: Buffer;
  from: string;
  to: string;
  /** How each side names the bookkeeping beside the key. */
  fromBook: Bookkeeping;
  toBook: Bookkeeping;
  /** Each side's live slot map when it is a Redis Cluster (redirects are followed), else null. */
  fromOwners: SlotOwners | null;
  toOwners: SlotOwners | null;
}

/** Indexes of `items` grouped by `key`, groups and indexes in first-seen order (targets per script). */
export function groupIndexes<T>(items: readonly T[], key: (item: T) => string): number[][] {
  const byKey = new Map<string, number[]>();
  const groups: number[][] = [];
  items.forEach((item, i) => {
    const k = key(item);
    let g = byKey.get(k);
    if (g === undefined) {
      g = [];
      byKey.set(k, g);
      groups.push(g);
    }
    g.push(i);
  });
  return groups;
}

/** A side's live slot map, or null for a ring. */
export function ownersOf(side: KeySpace): SlotOwners | null {
  return side instanceof ClusterKeySpace ? side.owners : null;
}

/** The keys among `keys` that the placement copies to a new owner after a write (none outside a migration). */
export function copyTargets(placement: Placement | undefined, keys: readonly Buffer[]): CopyTarget[] {
  if (placement === undefined) return [];
  return targetsOf(placement, keys, (key) => placement.copyTarget(key));
}

/**
 * copyTargets of keys that share `shard` (the dispatcher's shard of a request, from the same
 * placement): their owners are the shard's, so no key is hashed again.
 */
export function shardTargets(placement: Placement, keys: readonly Buffer[], shard: number): CopyTarget[] {
  const t = placement.copyTargetOfShard(shard);
  return t === null ? [] : targetsOf(placement, keys, () => t);
}

/**
 * The keys among `keys` that move, each hashed once for both sides; with `onNode`, on a ring side A
 * only those whose node in A is `onNode` (a change feed's node: a key changed on a node that does
 * not own it in A is side B's write there).
 */
export function movingTargets(placement: Placement, keys: readonly Buffer[], onNode?: string, distinct = false): CopyTarget[] {
  const onlyOnNode = onNode !== undefined && placement.from.kind === 'ring';
  return targetsOf(
    placement,
    keys,
    (key) => {
      const shard = placement.shardOf(key);
      return onlyOnNode && placement.writeAddress(shard) !== onNode ? null : placement.copyTargetOfShard(shard);
    },
    distinct,
  );
}

/**
 * A CopyTarget for each distinct key `where` gives owners, the sides' bookkeeping read once.
 * `distinct`: the caller names each key once (a change feed's batch), so no set of names is kept.
 */
function targetsOf(placement: Placement, keys: readonly Buffer[], where: (key: Buffer) => { from: string; to: string } | null, distinct = false): CopyTarget[] {
  const targets: CopyTarget[] = [];
  if (!placement.converges || placement.to === null) return targets;
  const fromBook = bookkeepingOf(placement.from.kind);
  const toBook = bookkeepingOf(placement.to.kind);
  const fromOwners = ownersOf(placement.from);
  const toOwners = ownersOf(placement.to);
  // Most writes name one key: no set of names for them.
  const seen = keys.length > 1 && !distinct ? new Set<string>() : null;
  for (const key of keys) {
    if (seen !== null) {
      const id = key.toString('latin1');
      if (seen.has(id)) continue;
      seen.add(id);
    }
    const t = where(key);
    if (t !== null) targets.push({ key, from: t.from, to: t.to, fromBook, toBook, fromOwners, toOwners });
  }
  return targets;
}

/** Applies each target's snapshot on its new owner; throws when a node cannot be reached or errs. */
export function applySnapshots(ctx: ProxyContext, clientId: number, targets: readonly CopyTarget[], snapshots: readonly Snapshot[]): Promise<ApplyOutcome[]> {
  const opts = { lane: clientId, maxRedirects: ctx.forward.maxRedirects, retryWindowMs: ctx.forward.retryWindowMs };
  return Promise.all(
    targets.map(async (t, i) => parseApply(await sideRequest(ctx.pool, t.toOwners, t.to, applyCommand(t.key, snapshots[i], false, t.toBook), opts))),
  );
}

/**
 * Snapshot on the key's old node, then apply on its new one, as two steps: after a write whose own
 * snapshot could not be taken with it (a blocking pop's reply, a burst whose outcome is unknown).
 * Resolves with the snapshots and their outcomes; throws as applySnapshots does.
 */
export async function snapshotThenApply(ctx: ProxyContext, clientId: number, targets: readonly CopyTarget[]): Promise<{ snapshots: Snapshot[]; outcomes: ApplyOutcome[] }> {
  const snapshots = await Promise.all(
    targets.map(async (t) => {
      const opts = { lane: clientId, maxRedirects: ctx.forward.maxRedirects, retryWindowMs: ctx.forward.retryWindowMs };
      const frame = await sideRequest(ctx.pool, t.fromOwners, t.from, snapshotCommand(t.key, false, t.fromBook), opts);
      const err = errorText(frame);
      if (err !== null) throw new Error(`${t.from}: ${err}`);
      return parseSnapshot(frame);
    }),
  );
  return { snapshots, outcomes: await applySnapshots(ctx, clientId, targets, snapshots) };
}

/**
 * Whether ring B, fenced by a proxy entering `done`, missed this write: `none` when every key's
 * write reached B (an applied snapshot numbered at least this one's carried it), `all` when none
 * did (it must run once on B), `some` when only part of it did.
 */
export function missedByFence(outcomes: readonly ApplyOutcome[], snapshots: readonly Snapshot[]): 'none' | 'all' | 'some' {
  let missed = 0;
  outcomes.forEach((o, i) => {
    if (o.kind === 'fenced' && o.version < snapshots[i].version) missed++;
  });
  if (missed === 0) return 'none';
  return missed === outcomes.length ? 'all' : 'some';
}
