/**
 * `slotproxy migrate cleanup`: after `done`, deletes from each node of ring A the keys it no longer
 * owns in side B, and slotproxy's migration bookkeeping from every node of both sides (on a
 * cluster side, the per-slot keys found by SCAN on every master).
 */
import { Placement } from '../../../sharding/migration';
import { KeySpace, ownerOfKey } from '../../../sharding/key-space';
import { NodeClient, scanStep } from './node-client';
import { APPLIED_KEY, REFUSED_KEY } from '../follow-node-keys';
import { BOOKKEEPING_PREFIX, DIGESTS_KEY, FENCE_KEY, VERSIONS_KEY, isBookkeepingKey } from '../converge';
import { COPY_STATE_KEY } from './copy';
import { FOLLOW_REQUEST_KEY, FOLLOW_SYNC_KEY } from '../follow-progress';
import { CLOSING_KEY } from '../closing';
import { READING_KEY } from '../read-barrier';
import { COPIERS_KEY } from '../copier-lease';
import { Progress } from './progress';

export async function cleanupMoved(nodes: NodeClient, placement: Placement, opts: { batch: number; progress: boolean }): Promise<{ deleted: number }> {
  const to = placement.to;
  if (to === null) throw new Error('the config has no migration: section');
  const from = placement.from;
  const sources = from.masters();
  const sizes = await Promise.all(sources.map(async (a) => Number(await nodes.call(a, ['DBSIZE']))));
  const progress = opts.progress ? new Progress('cleanup', sizes.reduce((sum, n) => sum + n, 0)) : null;
  let deleted = 0;
  let scanned = 0;
  for (const addr of sources) {
    let cursor = '0';
    do {
      const step = await scanStep(nodes, addr, cursor, opts.batch);
      const gone = step.keys.filter((k) => !isBookkeepingKey(k) && ownerOfKey(from, k) === addr && ownerOfKey(to, k) !== addr);
      deleted += await unlink(nodes, from, addr, gone);
      scanned += step.keys.length;
      progress?.update(scanned, `${deleted} deleted`);
      cursor = step.cursor;
    } while (cursor !== '0');
  }
  await removeBookkeeping(nodes, from, opts.batch);
  await removeBookkeeping(nodes, to, opts.batch);
  progress?.finish();
  return { deleted };
}

/** UNLINK of keys found on `addr`: in one command on a ring node, one per key on a cluster node (one slot per command there). */
async function unlink(nodes: NodeClient, side: KeySpace, addr: string, keys: Buffer[]): Promise<number> {
  if (keys.length === 0) return 0;
  if (side.kind === 'ring') return Number(await nodes.call(addr, ['UNLINK', ...keys]));
  const counts = await Promise.all(keys.map(async (k) => Number(await nodes.call(addr, ['UNLINK', k]))));
  return counts.reduce((sum, n) => sum + n, 0);
}

/** slotproxy's own keys on a side: a fixed list of names per ring node; on a cluster, the per-slot keys SCAN finds on each master. */
async function removeBookkeeping(nodes: NodeClient, side: KeySpace, batch: number): Promise<void> {
  for (const addr of side.masters()) {
    if (side.kind === 'ring') {
      await nodes.call(addr, ['UNLINK', VERSIONS_KEY, DIGESTS_KEY, COPY_STATE_KEY, FENCE_KEY, CLOSING_KEY, READING_KEY, COPIERS_KEY, APPLIED_KEY, REFUSED_KEY, FOLLOW_SYNC_KEY, FOLLOW_REQUEST_KEY]);
      continue;
    }
    let cursor = '0';
    do {
      const r = await nodes.call(addr, ['SCAN', cursor, 'MATCH', `${BOOKKEEPING_PREFIX}*`, 'COUNT', String(batch)]);
      const [next, keys] = Array.isArray(r) ? r : [];
      await unlink(nodes, side, addr, (Array.isArray(keys) ? keys : []).filter((k): k is Buffer => Buffer.isBuffer(k)));
      cursor = Buffer.isBuffer(next) ? next.toString('latin1') : '0';
    } while (cursor !== '0');
  }
}
