/**
 * The steps every converging write shares (proxy/migration/converge.ts is the protocol): which of
 * a request's keys move, applying their snapshots on the new owners, and reading the fence's
 * answer. A single write, a transaction's EXEC and a blocking command each take their snapshots
 * their own way (inside the write's MULTI, inside EXEC, or right after the pop) and then meet here.
 */
import { ProxyContext } from '../context';
import { request } from '../backend/request';
import { errorText } from '../resp/decode-reply';
import { Placement } from '../../sharding/migration';
import { ApplyOutcome, Snapshot, applyCommand, parseApply, parseSnapshot, snapshotCommand } from './converge';

/** A key of the write whose owner in ring B (`to`) differs from its node in ring A (`from`). */
export interface CopyTarget {
  key: Buffer;
  from: string;
  to: string;
}

/** The keys among `keys` that the placement copies to a new owner after a write (none outside a migration). */
export function copyTargets(placement: Placement | undefined, keys: Iterable<Buffer>): CopyTarget[] {
  const targets: CopyTarget[] = [];
  if (placement === undefined || !placement.converges) return targets;
  const seen = new Set<string>();
  for (const key of keys) {
    const t = placement.copyTarget(key);
    if (t === null) continue;
    const id = key.toString('latin1');
    if (seen.has(id)) continue;
    seen.add(id);
    targets.push({ key, ...t });
  }
  return targets;
}

/** Applies each target's snapshot on its new owner; throws when a node cannot be reached or errs. */
export function applySnapshots(ctx: ProxyContext, clientId: number, targets: readonly CopyTarget[], snapshots: readonly Snapshot[]): Promise<ApplyOutcome[]> {
  return Promise.all(targets.map(async (t, i) => parseApply(await request(ctx.pool.connection(t.to, clientId), applyCommand(t.key, snapshots[i])))));
}

/**
 * Snapshot on the key's old node, then apply on its new one, as two steps: after a write whose own
 * snapshot could not be taken with it (a blocking pop's reply, a burst whose outcome is unknown).
 * Resolves with the snapshots and their outcomes; throws as applySnapshots does.
 */
export async function snapshotThenApply(ctx: ProxyContext, clientId: number, targets: readonly CopyTarget[]): Promise<{ snapshots: Snapshot[]; outcomes: ApplyOutcome[] }> {
  const snapshots = await Promise.all(
    targets.map(async (t) => {
      const frame = await request(ctx.pool.connection(t.from, clientId), snapshotCommand(t.key));
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
