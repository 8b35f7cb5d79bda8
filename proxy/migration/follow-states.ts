/**
 * What the follower (follow.ts) asks of the nodes beside the stream: keys' states read on side A at a
 * known offset (a command carried as its result), and writes that reach every node of side B (a
 * flush's removal of the node's moving keys, a FUNCTION write).
 */
import { ProxyContext } from '../context';
import { KeySpace } from '../../sharding/key-space';
import { request } from '../backend/request';
import { decodeReply, Reply } from '../resp/decode-reply';
import { scanNode } from './feed-copy';
import { FollowRouter } from './follow-router';
import { withoutPastExpiry } from './follow-expiry';
import { log } from '../telemetry/log';
import { ownersOf } from './copy-keys';
import { recordKeyOf } from './follow-applier';

const LANE = 0;

/**
 * Each key's DUMP and PEXPIRETIME on `source` with ROLE's offset, in one MULTI: the states are A's
 * at that offset. Null when the node did not answer with them.
 */
export async function statesAt(ctx: ProxyContext, source: string, keys: readonly Buffer[]): Promise<{ at: number; commands: Buffer[][] } | null> {
  const args: Buffer[][] = [[Buffer.from('MULTI')]];
  for (const k of keys) args.push([Buffer.from('DUMP'), k], [Buffer.from('PEXPIRETIME'), k]);
  args.push([Buffer.from('ROLE')], [Buffer.from('EXEC')]);
  const conn = ctx.pool.connection(source, LANE);
  const replies = await Promise.all(args.map((a) => request(conn, a, ctx.forward.retryWindowMs)));
  const exec = decodeReply(replies[replies.length - 1], true);
  if (!Array.isArray(exec)) return null;
  const at = Number((exec[exec.length - 1] as Reply[])[1]);
  // The command that puts each key on B as A held it: RESTORE, or DEL for a key that is gone.
  const commands = keys.map((k, i) => {
    const dump = exec[2 * i];
    const expireAt = Number(exec[2 * i + 1]);
    if (dump === null || !Buffer.isBuffer(dump)) return [Buffer.from('DEL'), k];
    return withoutPastExpiry('restore', [Buffer.from('RESTORE'), k, Buffer.from(expireAt > 0 ? String(expireAt) : '0'), dump, Buffer.from('REPLACE'), ...(expireAt > 0 ? [Buffer.from('ABSTTL')] : [])]);
  });
  return { at, commands };
}

/** A FLUSHALL on `source`, or a new full sync: its moving keys are removed from every node of B. */
export async function removeMovingKeys(ctx: ProxyContext, to: KeySpace, source: string, router: FollowRouter): Promise<void> {
  for (const b of to.masters()) {
    if (b === source) continue;
    await scanNode(ctx, b, async (keys) => {
      const mine = keys.filter((k) => router.ownerInB(k) === b);
      if (mine.length > 0) await request(ctx.pool.connection(b, LANE), ['DEL', ...mine], ctx.forward.retryWindowMs);
    });
  }
}

/** A FUNCTION write on every master of B but `source` (already there). */
export async function onEveryMaster(ctx: ProxyContext, to: KeySpace | null, source: string, args: Buffer[]): Promise<void> {
  for (const b of to?.masters() ?? []) {
    if (b === source) continue;
    const frame = await request(ctx.pool.connection(b, LANE), args, ctx.forward.retryWindowMs);
    if (frame[0] === 45 && !/not found|already exists/i.test(frame.toString())) log.warn({ node: b, error: frame.toString().trim() }, 'migration: a FUNCTION write of side A failed on side B');
  }
}

/**
 * Where a follow of `source` resumes: every node of B recorded an offset in the same history (one
 * replid), the lowest of them, and each node's own (it skips what it holds); null for a full sync.
 */
export async function recordedOffsets(ctx: ProxyContext, to: KeySpace, source: string): Promise<{ replid: string; offset: number; floors: Map<string, number> } | null> {
  const owners = ownersOf(to);
  let replid: string | null = null;
  let lowest = Infinity;
  const floors = new Map<string, number>();
  for (const b of to.masters()) {
    const reply = decodeReply(await request(ctx.pool.connection(b, LANE), ['HGET', recordKeyOf(b, owners), source], ctx.forward.retryWindowMs));
    if (typeof reply !== 'string') return null;
    const [id, off] = reply.split(' ');
    if (replid !== null && id !== replid) return null;
    replid = id;
    floors.set(b, Number(off));
    lowest = Math.min(lowest, Number(off));
  }
  if (replid === null || !Number.isFinite(lowest)) return null;
  return { replid, offset: lowest, floors };
}

/** Every node of B's record of where it holds `source`'s history: set to `value`, or removed (null: a snapshot is being restored). */
export async function writeRecords(ctx: ProxyContext, to: KeySpace, source: string, value: string | null): Promise<void> {
  const owners = ownersOf(to);
  for (const b of to.masters()) {
    const key = recordKeyOf(b, owners);
    await request(ctx.pool.connection(b, LANE), value === null ? ['HDEL', key, source] : ['HSET', key, source, value], ctx.forward.retryWindowMs);
  }
}
