/**
 * A proxy that does not copy a node of side A (copier-lease.ts) stands by for it: it keeps the keys
 * its feed named since the copier last confirmed, through a mark (carried-mark.ts), that every
 * change made on the node before it is on side B. Taking the node over, it copies those keys
 * instead of re-walking the whole node: nothing changed since the last confirmation that its feed
 * did not name, as long as the feed stayed up (a gap of its feed, and no confirmation since, means
 * a re-walk as before). The confirmation is asked for every tick of copier-lease.ts (TICK_MS).
 */
import { isBookkeepingKey } from './converge';
import { NodeChanges } from './node-changes';

/** Keys a standing-by proxy's feed named on `node` (push number `node.heard`). */
export function remember(node: NodeChanges, keys: readonly Buffer[]): void {
  for (const key of keys) if (!isBookkeepingKey(key)) node.standby.set(key.toString('latin1'), { key, seq: node.heard });
}

/**
 * Asks the copier to confirm what was heard so far (`confirmed` resolves true once it did), then
 * forgets the keys heard before the ask. A confirmation covers a gap of this proxy's own feed too,
 * when none opened meanwhile. One at a time per node.
 */
export async function prune(node: NodeChanges, confirmed: () => Promise<boolean>): Promise<void> {
  // Nothing heard, no gap: nothing to ask (so a fleet that takes no writes writes no mark either).
  if (node.pruning || node.mine || node.feed?.ready !== true || (node.standby.size === 0 && node.gapSince === null)) return;
  node.pruning = true;
  const through = node.heard;
  const epoch = node.gapEpoch;
  try {
    if (!(await confirmed()) || node.mine || node.gapEpoch !== epoch) return;
    for (const [id, entry] of node.standby) if (entry.seq <= through) node.standby.delete(id);
    node.standbyOk = true;
    node.gapSince = null;
  } finally {
    node.pruning = false;
  }
}

/**
 * Taking the node: what it stood by for goes to be copied. True when that covers the takeover (no
 * re-walk needed). `force` on a takeover: the last copier may have taken a key's snapshot (its
 * fingerprint recorded on A) and never applied it on B, so "only if changed" would skip the key.
 */
export function handOver(node: NodeChanges, force: boolean): boolean {
  for (const [id, entry] of node.standby) node.pending.set(id, { key: entry.key, force });
  node.standby.clear();
  const covers = node.standbyOk && node.gapSince === null && node.feed?.ready === true;
  node.standbyOk = false;
  return covers;
}
