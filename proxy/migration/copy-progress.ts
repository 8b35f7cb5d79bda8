/**
 * The history copy's progress, for /metrics. `slotproxy migrate copy` runs as its own process and
 * saves, on each node of ring A, its SCAN cursor (`done` when that node is finished) and how many
 * keys it copied (tools/copy.ts); the proxy reads that back over its own connections.
 */
import { ProxyContext } from '../context';
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';
import { READ_COPY_STATE, parseCopyState } from './tools/copy';
import type { MigrationCopyProgress } from '../telemetry/metrics';

const READ_TIMEOUT_MS = 1000;

/** Null outside a migration. A node that does not answer counts as not done and adds no keys. */
export async function readCopyProgress(ctx: ProxyContext): Promise<MigrationCopyProgress | null> {
  const placement = ctx.ring?.placement;
  if (placement === undefined || !placement.migrating) return null;
  const nodes = placement.from.nodes;
  const states = await Promise.all(
    nodes.map(async (n) => {
      try {
        const state = parseCopyState(decodeReply(await request(ctx.pool.connection(n.addr, 0), READ_COPY_STATE, READ_TIMEOUT_MS), true));
        return { done: state.cursor === 'done', copied: state.copied };
      } catch {
        return { done: false, copied: 0 };
      }
    }),
  );
  return {
    copied: states.reduce((sum, s) => sum + s.copied, 0),
    nodesDone: states.filter((s) => s.done).length,
    nodes: nodes.length,
  };
}
