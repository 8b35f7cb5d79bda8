/**
 * A converging burst's snapshots applied on side B (converging-batch.ts), as few scripts as B
 * allows: on a ring B one APPLY_MANY per node (a ring node has one fence and one versions hash);
 * on a Redis Cluster B, whose bookkeeping is per slot, one APPLY_NODE per node for keys of any of
 * its slots. A cluster node that no longer serves one of those slots (a reshard of B) answers with
 * an error, maybe after applying some keys: the keys then go again per slot (APPLY_MANY, following
 * redirects), where those already applied answer "older" (converge.ts: a version is applied once).
 */
import { ProxyContext } from '../context';
import { ApplyOutcome, Snapshot, applyManyCommand, applyNodeCommand, parseApplyMany } from './converge';
import { CopyTarget, groupIndexes } from './copy-keys';
import { migrationScript } from './side-request';

/** Per target, what its APPLY answered, or why it failed. */
export async function applyBurst(ctx: ProxyContext, targets: readonly CopyTarget[], snapshots: readonly Snapshot[], lane: number): Promise<(ApplyOutcome | Error)[]> {
  const out = new Array<ApplyOutcome | Error>(targets.length);
  const perSlot = (t: CopyTarget): string => `${t.to} ${t.toBook.fenceKey(t.key)}`;
  const groups = groupIndexes(targets, (t) => (t.toOwners === null ? perSlot(t) : t.to));
  await Promise.all(
    groups.map(async (g) => {
      const t0 = targets[g[0]];
      if (t0.toOwners !== null && g.length > 1) {
        try {
          const frame = await migrationScript(ctx, t0.toOwners, t0.to, (sha) => applyNodeCommand(g.map((i) => targets[i].key), g.map((i) => snapshots[i]), sha, t0.toBook), lane);
          parseApplyMany(frame, g.length).forEach((o, j) => (out[g[j]] = o));
          return;
        } catch {
          // Per slot, below.
        }
        await Promise.all(groupIndexes(g.map((i) => targets[i]), perSlot).map((s) => applyMany(ctx, targets, snapshots, s.map((j) => g[j]), lane, out)));
        return;
      }
      await applyMany(ctx, targets, snapshots, g, lane, out);
    }),
  );
  return out;
}

/** One APPLY_MANY of targets `g` (one node and fence), outcomes into `out`. */
async function applyMany(ctx: ProxyContext, targets: readonly CopyTarget[], snapshots: readonly Snapshot[], g: readonly number[], lane: number, out: (ApplyOutcome | Error)[]): Promise<void> {
  const t0 = targets[g[0]];
  try {
    const frame = await migrationScript(ctx, t0.toOwners, t0.to, (sha) => applyManyCommand(g.map((i) => targets[i].key), g.map((i) => snapshots[i]), sha, t0.toBook), lane);
    parseApplyMany(frame, g.length).forEach((o, j) => (out[g[j]] = o));
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    for (const i of g) out[i] = e;
  }
}
