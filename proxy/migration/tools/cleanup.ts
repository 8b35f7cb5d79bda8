/**
 * `slotproxy migrate cleanup`: after `done`, deletes from each node of ring A the keys it no longer
 * owns in side B, and slotproxy's migration bookkeeping from every node of both sides (on a
 * cluster side, the per-slot keys found by SCAN on every master).
 */
import { Placement } from '../../../sharding/migration';
import { ownerOfKey } from '../../../sharding/key-space';
import { NodeClient, scanStep } from './node-client';
import { BOOKKEEPING_PREFIX, FENCE_KEY, VERSIONS_KEY, isBookkeepingKey } from '../converge';
import { COPY_STATE_KEY } from './copy';
import { Progress } from './progress';

export async function cleanupMoved(nodes: NodeClient, placement: Placement, opts: { batch: number; progress: boolean }): Promise<{ deleted: number }> {
  const to = placement.to;
  if (to === null) throw new Error('the config has no migration: section');
  const sources = placement.from.masters();
  const sizes = await Promise.all(sources.map(async (a) => Number(await nodes.call(a, ['DBSIZE']))));
  const progress = opts.progress ? new Progress('cleanup', sizes.reduce((s, n) => s + n, 0)) : null;
  let deleted = 0;
  let scanned = 0;
  for (const addr of sources) {
    let cursor = '0';
    do {
      const step = await scanStep(nodes, addr, cursor, opts.batch);
      const gone = step.keys.filter((k) => !isBookkeepingKey(k) && ownerOfKey(placement.from, k) === addr && ownerOfKey(to, k) !== addr);
      if (gone.length > 0) deleted += Number(await nodes.call(addr, ['UNLINK', ...gone]));
      scanned += step.keys.length;
      progress?.update(scanned, `${deleted} deleted`);
      cursor = step.cursor;
    } while (cursor !== '0');
  }
  for (const addr of placement.from.masters()) await nodes.call(addr, ['UNLINK', VERSIONS_KEY, COPY_STATE_KEY, FENCE_KEY]);
  if (to.kind === 'ring') {
    for (const addr of to.masters()) await nodes.call(addr, ['UNLINK', VERSIONS_KEY, COPY_STATE_KEY, FENCE_KEY]);
  } else {
    // One key per slot, each on the master that serves it: found there, deleted there.
    for (const addr of to.masters()) {
      let cursor = '0';
      do {
        const r = await nodes.call(addr, ['SCAN', cursor, 'MATCH', `${BOOKKEEPING_PREFIX}*`, 'COUNT', String(opts.batch)]);
        const [next, keys] = Array.isArray(r) ? r : [];
        for (const k of Array.isArray(keys) ? keys : []) if (Buffer.isBuffer(k)) await nodes.call(addr, ['UNLINK', k]);
        cursor = Buffer.isBuffer(next) ? next.toString('latin1') : '0';
      } while (cursor !== '0');
    }
  }
  progress?.finish();
  return { deleted };
}
