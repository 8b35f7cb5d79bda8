/**
 * `slotproxy migrate cleanup`: after `done`, deletes from each node of ring A the keys it no longer
 * owns in ring B, and slotproxy's migration bookkeeping from every node.
 */
import { Placement } from '../../../sharding/migration';
import { NodeClient, scanStep } from './node-client';
import { FENCE_KEY, VERSIONS_KEY, isBookkeepingKey } from '../converge';
import { COPY_STATE_KEY } from './copy';
import { Progress } from './progress';

export async function cleanupMoved(nodes: NodeClient, placement: Placement, opts: { batch: number; progress: boolean }): Promise<{ deleted: number }> {
  const to = placement.to;
  if (to === null) throw new Error('the config has no migration: section');
  const sources = placement.from.addresses;
  const sizes = await Promise.all(sources.map(async (a) => Number(await nodes.call(a, ['DBSIZE']))));
  const progress = opts.progress ? new Progress('cleanup', sizes.reduce((s, n) => s + n, 0)) : null;
  let deleted = 0;
  let scanned = 0;
  for (const addr of sources) {
    let cursor = '0';
    do {
      const step = await scanStep(nodes, addr, cursor, opts.batch);
      const gone = step.keys.filter((k) => !isBookkeepingKey(k) && placement.from.nodeOf(k).addr === addr && to.nodeOf(k).addr !== addr);
      if (gone.length > 0) deleted += Number(await nodes.call(addr, ['UNLINK', ...gone]));
      scanned += step.keys.length;
      progress?.update(scanned, `${deleted} deleted`);
      cursor = step.cursor;
    } while (cursor !== '0');
  }
  for (const addr of placement.allAddresses()) await nodes.call(addr, ['UNLINK', VERSIONS_KEY, COPY_STATE_KEY, FENCE_KEY]);
  progress?.finish();
  return { deleted };
}
