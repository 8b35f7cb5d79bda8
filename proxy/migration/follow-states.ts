/**
 * What the follower (follow.ts) asks of the nodes beside the stream: keys' states read on side A at a
 * known offset (a command carried as its result), and writes that reach every node of side B (a
 * flush's removal of the node's moving keys, a FUNCTION write). A node of B that does not answer
 * (paused, slow past the command timeout, restarting) is waited for (onB): only its error replies
 * are failures.
 */
import { ProxyContext } from '../context';
import { KeySpace, SlotOwners } from '../../sharding/key-space';
import { sideRequest } from './side-request';
import { ownersOf } from './copy-keys';
import { request } from '../backend/request';
import { BackendConnection } from '../backend/connection';
import { decodeReply, Reply } from '../resp/decode-reply';
import { FollowRouter } from './follow-router';
import { withoutPastExpiry } from './follow-expiry';
import { log } from '../telemetry/log';

const LANE = 0;
const RETRY_MS = 100;
const RETRY_CAP_MS = 2000;
/** Error replies of a node that takes the request again shortly (loading, a busy script, a cluster in a failover). */
const TRANSIENT = /^-(LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN)\b/;
/** Keys per SCAN of a node of B. */
const SCAN_COUNT = '500';

/**
 * `args` on node `address` of B until it answers: a request that gets no reply (the connection's
 * command timeout, a lost connection) or a transient error goes again after a backoff, while
 * `live()`; the reply frame, an error reply too. Throws only once `live()` is false.
 */
export async function onB(ctx: ProxyContext, address: string, args: readonly (Buffer | string)[], live: () => boolean, owners: SlotOwners | null = null, via?: () => BackendConnection): Promise<Buffer> {
  for (let attempt = 0; ; attempt++) {
    if (!live()) throw new Error('the follow ended');
    try {
      // No timeout of its own: the connection's command timeout fails it, and every request queued with it.
      // With `owners` (a keyed request to a cluster B) a redirect is followed: B failed over or resharded meanwhile.
      const frame = owners === null ? await request(via?.() ?? ctx.pool.connection(address, LANE), args, 0) : await sideRequest(ctx.pool, owners, address, args, { lane: LANE, maxRedirects: ctx.forward.maxRedirects, retryWindowMs: ctx.forward.retryWindowMs });
      if (!TRANSIENT.test(frame.toString('latin1', 0, 16))) return frame;
    } catch {
      // no reply: sent again
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(RETRY_CAP_MS, RETRY_MS * 2 ** attempt)).unref());
  }
}

/**
 * Each key's DUMP and PEXPIRETIME on `source` with ROLE's offset, in one MULTI: the states are A's
 * at that offset. A key whose slot has left the node (a reshard inside a cluster A: MOVED or ASK,
 * which aborts the MULTI) is read again without it and gets null: its new master's stream carries
 * it, and this node's stream its DEL. Null when the node did not answer with them.
 */
export async function statesAt(ctx: ProxyContext, source: string, keys: readonly Buffer[]): Promise<{ at: number; commands: (Buffer[] | null)[] } | null> {
  const args: Buffer[][] = [[Buffer.from('MULTI')]];
  for (const k of keys) args.push([Buffer.from('DUMP'), k], [Buffer.from('PEXPIRETIME'), k]);
  args.push([Buffer.from('ROLE')], [Buffer.from('EXEC')]);
  const conn = ctx.pool.connection(source, LANE);
  const replies = await Promise.all(args.map((a) => request(conn, a, ctx.forward.retryWindowMs)));
  const exec = decodeReply(replies[replies.length - 1], true);
  if (!Array.isArray(exec)) {
    const gone = keys.map((_, i) => LEFT_NODE.test(replies[1 + 2 * i].toString('latin1', 0, 8)));
    if (!gone.some(Boolean)) return null;
    const rest = await statesAt(ctx, source, keys.filter((_, i) => !gone[i]));
    if (rest === null) return null;
    let next = 0;
    return { at: rest.at, commands: gone.map((g) => (g ? null : rest.commands[next++])) };
  }
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

/** A queued command's refusal by a cluster node that no longer serves its key. */
const LEFT_NODE = /^-(MOVED|ASK) /;

/** A FLUSHALL on `source`, or a new full sync: its moving keys are removed from every node of B. */
export async function removeMovingKeys(ctx: ProxyContext, to: KeySpace | null, source: string, router: FollowRouter, live: () => boolean): Promise<void> {
  for (const b of to?.masters() ?? []) {
    if (b === source) continue;
    // The SCAN on a connection of its own: on the shared one it waits behind another follower's
    // RESTOREs to the same node, each held as long as the node holds writes (a pause, a slow B).
    let scanner: BackendConnection | null = null;
    const via = (): BackendConnection => (scanner !== null && !scanner.isClosed ? scanner : (scanner = ctx.pool.dedicated(b, ctx.pool.linkOptions().commandTimeoutMs)));
    let cursor = '0';
    try {
      do {
        const reply = decodeReply(await onB(ctx, b, ['SCAN', cursor, 'COUNT', SCAN_COUNT], live, null, via), true);
        if (!Array.isArray(reply) || reply.length !== 2 || !Buffer.isBuffer(reply[0]) || !Array.isArray(reply[1])) throw new Error(`${b}: unexpected SCAN reply`);
        cursor = reply[0].toString('latin1');
        const mine = reply[1].filter((k): k is Buffer => Buffer.isBuffer(k) && router.ownerInB(k) === b && router.heldInA(k));
        // A cluster B takes one DEL per key (its keys span slots), each following a redirect.
        const owners = to === null ? null : ownersOf(to);
        const dels = owners === null ? (mine.length > 0 ? [mine] : []) : mine.map((k) => [k]);
        for (const frame of await Promise.all(dels.map((keys) => onB(ctx, b, ['DEL', ...keys], live, owners)))) {
          if (frame[0] === 45) throw new Error(`${b} refused DEL: ${frame.toString('utf8', 1, frame.length - 2)}`);
        }
      } while (cursor !== '0');
    } finally {
      (scanner as BackendConnection | null)?.close('the scan for moving keys is done');
    }
  }
}

/** A FUNCTION write on every master of B but `source` (already there). */
export async function onEveryMaster(ctx: ProxyContext, to: KeySpace | null, source: string, args: Buffer[], live: () => boolean): Promise<void> {
  for (const b of to?.masters() ?? []) {
    if (b === source) continue;
    const frame = await onB(ctx, b, args, live);
    if (frame[0] === 45 && !/not found|already exists/i.test(frame.toString())) log.warn({ node: b, error: frame.toString().trim() }, 'migration: a FUNCTION write of side A failed on side B');
  }
}
