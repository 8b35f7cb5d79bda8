/**
 * Where a follow resumes when side A's master changed under it (follow.ts). A failover promotes a
 * replica at another address; B's records are per followed address, so the new master's follower
 * finds none of its own. The promoted replica keeps its old master's history as its second
 * replication id (INFO replication's `master_replid2`, valid through `second_repl_offset`), and
 * answers `PSYNC <old replid> <offset + 1>` with `+CONTINUE` while that offset is at or before
 * it and still in its backlog (redis replication.c, masterTryPartialResynchronization). So:
 *
 *   INFO replication on the node -> its replid, replid2, second_repl_offset (and that it is a master)
 *     -> B's records of every followed address (one hash per node of B)
 *     -> the record in the node's own history (its replid), or in its old master's (its replid2,
 *        through second_repl_offset): PSYNC from there; each node of B keeps its own floor.
 *
 * Before that PSYNC the records are copied to the new address under the new replid (offsets go on
 * in the same count, and a node accepts its current replid at any offset still in its backlog), so
 * a later resume or takeover finds its own; once `+CONTINUE` came, the old address's are removed.
 * The old master may have gone on past the promotion with no-ops only (Sentinel's hellos are
 * PUBLISHed into its stream): each record's third field, the last command applied on that node of
 * B, says so, and the follow then resumes at `second_repl_offset` (inHistory below).
 */
import { ProxyContext } from '../context';
import { KeySpace } from '../../sharding/key-space';
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';
import { ownersOf } from './copy-keys';
import { recordKeyOf } from './follow-node-keys';

const LANE = 0;

export interface NodeHistory {
  role: string;
  replid: string;
  replid2: string;
  /** The last offset of replid2's history this node holds, plus one (-1 when it has none). */
  secondOffset: number;
}

export interface ResumePoint {
  replid: string;
  /** The lowest offset recorded on B: PSYNC asks for the byte after it. */
  offset: number;
  /** Each node of B's own record (it skips what it holds). */
  floors: Map<string, number>;
  /** The followed address the records are under (another one after a failover). */
  recordedAs: string;
  /** The end of the last command applied on any node of B: past it, only no-ops. */
  lastApplied: number;
}

/** The node's replication ids, from INFO replication. */
export async function historyOf(ctx: ProxyContext, source: string): Promise<NodeHistory> {
  const reply = decodeReply(await request(ctx.pool.connection(source, LANE), ['INFO', 'replication'], ctx.forward.retryWindowMs));
  if (typeof reply !== 'string') throw new Error(`INFO replication answered ${reply instanceof Error ? reply.message : String(reply)}`);
  const f = new Map<string, string>();
  for (const line of reply.split('\r\n')) {
    const at = line.indexOf(':');
    if (at > 0) f.set(line.slice(0, at), line.slice(at + 1));
  }
  return { role: f.get('role') ?? '', replid: f.get('master_replid') ?? '', replid2: f.get('master_replid2') ?? '', secondOffset: Number(f.get('second_repl_offset') ?? -1) };
}

/** Every followed address's record on every node of B: address -> node of B -> "replid offset". */
async function allRecords(ctx: ProxyContext, to: KeySpace): Promise<Map<string, Map<string, string>>> {
  const owners = ownersOf(to);
  const out = new Map<string, Map<string, string>>();
  for (const b of to.masters()) {
    const reply = decodeReply(await request(ctx.pool.connection(b, LANE), ['HGETALL', recordKeyOf(b, owners)], ctx.forward.retryWindowMs));
    if (!Array.isArray(reply)) throw new Error(`HGETALL of the applied offsets on ${b} answered ${String(reply)}`);
    for (let i = 0; i + 1 < reply.length; i += 2) {
      const field = String(reply[i]);
      let per = out.get(field);
      if (per === undefined) out.set(field, (per = new Map()));
      per.set(b, String(reply[i + 1]));
    }
  }
  return out;
}

/**
 * The record `source` resumes from: its own when it is in the node's history, else one in the
 * history the node took over (a failover); its own anyway when none is (PSYNC then answers a full
 * sync); null when there is nothing to resume from.
 */
export async function resumePoint(ctx: ProxyContext, to: KeySpace, source: string, history: NodeHistory): Promise<ResumePoint | null> {
  const records = await allRecords(ctx, to);
  const masters = to.masters();
  const points: ResumePoint[] = [];
  for (const [address, per] of records) {
    // Every node of B recorded it, in one history: a half-written record (a snapshot being restored) is not one.
    if (masters.length === 0 || masters.some((b) => !per.has(b))) continue;
    const floors = new Map<string, number>();
    let replid: string | null = null;
    let lastApplied = -1;
    for (const [b, value] of per) {
      if (!masters.includes(b)) continue;
      const [id, off, last] = value.split(' ');
      if (replid !== null && id !== replid) replid = '';
      else replid = id;
      floors.set(b, Number(off));
      // No third field (a snapshot's record, an older proxy's): the offset itself.
      lastApplied = Math.max(lastApplied, Number(last ?? off));
    }
    if (replid === null || replid === '' || [...floors.values()].some((n) => !Number.isSafeInteger(n)) || !Number.isSafeInteger(lastApplied)) continue;
    points.push({ replid, offset: Math.min(...floors.values()), floors, recordedAs: address, lastApplied });
  }
  const own = points.find((p) => p.recordedAs === source) ?? null;
  if (own !== null && own.replid === history.replid && history.replid !== '') return own;
  const inherited = points.map((p) => inHistory(p, history)).filter((p): p is ResumePoint => p !== null).sort((x, y) => y.offset - x.offset)[0];
  return inherited ?? own;
}

/**
 * The point as the node can continue it, through its second replication id: at most its
 * `second_repl_offset`. The old master may have gone on past the promotion with no-ops only
 * (Sentinel PUBLISHes its hellos on every master it watches, into the stream): then B's state is
 * also the state at the promotion, and the follow resumes there, each node's floor lowered to it.
 * Null when the node cannot continue it.
 */
function inHistory(p: ResumePoint, history: NodeHistory): ResumePoint | null {
  if (p.replid !== history.replid2 || history.secondOffset <= 0) return null;
  if (p.offset + 1 <= history.secondOffset) return p;
  const at = history.secondOffset - 1;
  if (p.lastApplied > at) return null;
  return { ...p, offset: at, floors: new Map([...p.floors].map(([b, f]) => [b, Math.min(f, at)])) };
}

/**
 * Where the follow of `source` resumes, its records moved to `source` first when they are another
 * address's (so a resume that continues records under its own name from the start); null for a
 * full sync. A node that is not a master is not followed (a demoted master serves its replicas'
 * history too, and its new master's follower carries that).
 */
export async function resumeFrom(ctx: ProxyContext, to: KeySpace, source: string): Promise<ResumePoint | null> {
  const history = await historyOf(ctx, source);
  if (history.role !== 'master') throw new Error(`${source} is a ${history.role || 'node of unknown role'} now, not a master`);
  const point = await resumePoint(ctx, to, source, history);
  if (point === null || point.recordedAs === source) return point;
  const owners = ownersOf(to);
  for (const [b, floor] of point.floors) {
    await request(ctx.pool.connection(b, LANE), ['HSET', recordKeyOf(b, owners), source, `${history.replid} ${floor}`], ctx.forward.retryWindowMs);
  }
  return point;
}

/** After a `+CONTINUE` on records another address made: that address's records go (its follow is over). */
export async function forgetRecords(ctx: ProxyContext, to: KeySpace, point: ResumePoint): Promise<void> {
  const owners = ownersOf(to);
  for (const b of point.floors.keys()) await request(ctx.pool.connection(b, LANE), ['HDEL', recordKeyOf(b, owners), point.recordedAs], ctx.forward.retryWindowMs);
}
