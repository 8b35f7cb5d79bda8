/**
 * The history copy's progress, for /metrics. `slotproxy migrate copy` runs as its own process and
 * saves, on each node of ring A, its SCAN cursor (`done` when that node is finished) and how many
 * keys it copied, or for a cluster A one record of its slot walk (tools/copy.ts); the proxy reads
 * that back over its own connections. A cluster A counts as one node, done when the walk is.
 * Under the replication carry the history copy is each node's full sync, whose follower saves its
 * progress on the node (follow-progress.ts): read alike.
 */
import { ProxyContext } from '../context';
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';
import { CLUSTER_COPY_STATE_KEY, READ_COPY_STATE, parseCopyState, readCopyState } from './tools/copy';
import { ownersOf } from './copy-keys';
import { sideRequest } from './side-request';
import type { MigrationCopyProgress } from '../telemetry/metrics';
import { FullSyncRecord, readSyncRecord } from './follow-progress';
import { VerifyRecord, parseVerifyRecord, readVerifyRecord, verifyRecordPlace } from './tools/verify-record';

const READ_TIMEOUT_MS = 1000;

/**
 * Null outside a migration. Under the replication carry, the full syncs' records (follow-progress.ts):
 * keys read and restored, done once restored. A node that does not answer counts as not done and adds no keys.
 */
export async function readCopyProgress(ctx: ProxyContext): Promise<MigrationCopyProgress | null> {
  const placement = ctx.ring?.placement;
  if (placement === undefined || !placement.migrating) return null;
  if (ctx.ring?.carry.replication !== true) return readFeedsCopyProgress(ctx);
  const records = await Promise.all(placement.from.masters().map((a) => readSyncRecord(ctx, placement, a).catch(() => null)));
  const known = records.filter((r): r is FullSyncRecord => r !== null);
  return {
    copied: known.reduce((sum, r) => sum + r.restored, 0),
    scanned: known.reduce((sum, r) => sum + r.read, 0),
    nodesDone: known.filter((r) => r.state === 'done').length,
    nodes: records.length,
    carry: 'replication',
    total: known.length === records.length && known.every((r) => r.total >= 0) ? known.reduce((sum, r) => sum + Math.max(r.total, r.read), 0) : null,
  };
}

/** The feeds' copy (tools/copy.ts), whatever the carry: what the copier leases ask (copier-lease.ts). */
export async function readFeedsCopyProgress(ctx: ProxyContext): Promise<MigrationCopyProgress | null> {
  const placement = ctx.ring?.placement;
  if (placement === undefined || !placement.migrating) return null;
  const owners = ownersOf(placement.from);
  const nodes = owners === null ? placement.from.masters() : [owners.ownerOf(0) ?? ''];
  const read = (addr: string): Promise<Buffer> => askSideA(ctx, addr, owners === null ? READ_COPY_STATE : readCopyState(CLUSTER_COPY_STATE_KEY));
  const states = await Promise.all(
    nodes.map(async (addr) => {
      try {
        const state = parseCopyState(decodeReply(await read(addr), true));
        return { done: state.cursor === 'done', copied: state.copied, scanned: state.scanned };
      } catch {
        return { done: false, copied: 0, scanned: 0 };
      }
    }),
  );
  return {
    copied: states.reduce((sum, s) => sum + s.copied, 0),
    scanned: states.reduce((sum, s) => sum + s.scanned, 0),
    nodesDone: states.filter((s) => s.done).length,
    nodes: nodes.length,
  };
}

/** `migrate verify`'s last result saved on side A (tools/verify-record.ts); null outside a migration, before any, or when A does not answer. */
export async function readLastVerify(ctx: ProxyContext): Promise<VerifyRecord | null> {
  const placement = ctx.ring?.placement;
  if (placement === undefined || !placement.migrating) return null;
  const { addr, key } = verifyRecordPlace(placement);
  try {
    return parseVerifyRecord(decodeReply(await askSideA(ctx, addr, readVerifyRecord(key)), true));
  } catch {
    return null;
  }
}

/** One request to a node of side A over the proxy's own connections (a cluster A's follows its slot map). */
function askSideA(ctx: ProxyContext, addr: string, args: readonly string[]): Promise<Buffer> {
  const placement = ctx.ring?.placement;
  const owners = placement === undefined ? null : ownersOf(placement.from);
  return owners === null
    ? request(ctx.pool.connection(addr, 0), args, READ_TIMEOUT_MS)
    : sideRequest(ctx.pool, owners, addr, args, { lane: 0, timeoutMs: READ_TIMEOUT_MS, retryWindowMs: 0 });
}
