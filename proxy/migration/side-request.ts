/**
 * A request the migration makes itself to the node serving a key on one side (an APPLY on side B,
 * a fence, a snapshot on side A), as one bounded loop: on a Redis Cluster side it follows MOVED
 * (updating that side's slot map) and ASK (ASKING first, on the same connection), and retries
 * TRYAGAIN, CLUSTERDOWN and a node it cannot reach while the retry window lasts; on a ring side
 * the node's answer is final. Resolves with the final reply frame (an error reply is a frame too);
 * rejects when no reply came.
 */
import { BackendConnection } from '../backend/connection';
import { BackendPool } from '../backend/pool';
import { requestRaw } from '../backend/request';
import { SlotOwners } from '../../sharding/key-space';
import { redirectOf } from './redirect';
import * as encode from '../resp/encode';

export interface SideRequestOptions {
  lane: number;
  timeoutMs?: number;
  maxRedirects?: number;
  retryWindowMs?: number;
}

const ASKING = encode.command(['ASKING']);
const RETRY_BASE_MS = 20;
const RETRY_CAP_MS = 500;

/** `owners`: the side's live slot map, null for a ring side. */
export async function sideRequest(
  pool: BackendPool,
  owners: SlotOwners | null,
  address: string,
  args: readonly (Buffer | string)[],
  opts: SideRequestOptions,
): Promise<Buffer> {
  if (address === '') throw new Error('no node of the new cluster serves the key\'s slot');
  if (owners === null) return request(pool.connection(address, opts.lane), args, opts.timeoutMs ?? 0);
  const maxRedirects = opts.maxRedirects ?? 16;
  const window = opts.retryWindowMs ?? 5000;
  const started = Date.now();
  let target = address;
  let asking = false;
  let hops = 0;
  for (let attempt = 0; ; attempt++) {
    let frame: Buffer;
    try {
      const conn = pool.connection(target, opts.lane);
      if (asking) conn.send({ payload: ASKING, onReply: () => undefined, onFailure: () => undefined });
      frame = await request(conn, args, opts.timeoutMs ?? 0);
    } catch (err) {
      owners.requestRefresh();
      if (Date.now() - started >= window) throw err;
      await backoff(attempt);
      continue;
    }
    asking = false;
    const redirect = redirectOf(frame, target);
    if (redirect === null) return frame;
    if (redirect.kind !== 'retry') {
      if (++hops > maxRedirects) return frame;
      if (redirect.kind === 'moved') owners.applyMoved(redirect.slot, redirect.address);
      else asking = true;
      target = redirect.address;
      continue;
    }
    if (Date.now() - started < window) {
      owners.requestRefresh();
      await backoff(attempt);
      continue;
    }
    return frame;
  }
}

/**
 * One of the migration's scripts (converge.ts), by SHA1 (`command(true)`), and by body where the
 * node does not hold it (a restart, a failover, SCRIPT FLUSH), on lane `lane`.
 */
export async function migrationScript(
  ctx: { pool: BackendPool; forward: { maxRedirects: number; retryWindowMs: number } },
  owners: SlotOwners | null,
  address: string,
  command: (bySha: boolean) => (Buffer | string)[],
  lane: number,
): Promise<Buffer> {
  const opts = { lane, maxRedirects: ctx.forward.maxRedirects, retryWindowMs: ctx.forward.retryWindowMs };
  const frame = await sideRequest(ctx.pool, owners, address, command(true), opts);
  if (frame.length > 9 && frame.toString('latin1', 0, 9) === '-NOSCRIPT') return sideRequest(ctx.pool, owners, address, command(false), opts);
  return frame;
}

/**
 * Sent as no client's: a client's converging burst left open on the connection
 * (converging-batch.ts) is not sealed by it. Nothing here needs an order against a client's
 * requests: APPLYs and snapshots are ordered by their versions.
 */
const NO_CLIENT = Object.freeze({ id: -1 });

function request(conn: BackendConnection, args: readonly (Buffer | string)[], timeoutMs: number): Promise<Buffer> {
  return requestRaw(conn, encode.command(args), timeoutMs, String(args[0]), true, NO_CLIENT);
}

function backoff(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** attempt)));
}
