/**
 * `slotproxy migrate copy`, whichever carry the migration has (carry-choice.ts): under the change
 * feeds, the versioned walk of side A (copy.ts); under the replication carry, the history is each
 * node's full sync, run by the proxy that follows it: started or watched by follow-copy.ts.
 */
import { Placement } from '../../../sharding/migration';
import { NodeClient } from './node-client';
import { CopyOptions, CopyResult, copyMoved } from './copy';
import { copyByFullSync } from './follow-copy';

export interface HistoryCopy extends CopyResult {
  carry: 'feeds' | 'replication';
  /** Replication: keys the snapshots held, and whether every full sync was done before this run. */
  total?: number;
  already?: boolean;
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
  return { carry, ...(await copyByFullSync(nodes, placement, opts, print)) };
}
