/**
 * `slotproxy migrate copy`, whichever carry the migration has (carry-choice.ts): under the change
 * feeds, the versioned walk of side A (copy.ts); under the replication carry, the history is each
 * node's full sync, run by the proxy that follows it, so this waits for every one to be restored
 * on side B (follow-status.ts) and copies nothing itself.
 */
import { Placement } from '../../../sharding/migration';
import { NodeClient } from './node-client';
import { CopyOptions, CopyResult, copyMoved } from './copy';
import { waitForFullSyncs } from './follow-status';

export interface HistoryCopy extends CopyResult {
  carry: 'feeds' | 'replication';
}

export async function copyHistory(
  nodes: NodeClient,
  placement: Placement,
  opts: CopyOptions,
  print: (lines: string[]) => void = () => undefined,
  following: () => void = () => undefined,
): Promise<HistoryCopy> {
  const carry = await nodes.carry(placement);
  if (carry === 'feeds') return { carry, ...(await copyMoved(nodes, placement, opts)) };
  following();
  const started = Date.now();
  await waitForFullSyncs(nodes, placement, print);
  return { carry, scanned: 0, copied: 0, skippedNewer: 0, seconds: (Date.now() - started) / 1000 };
}
