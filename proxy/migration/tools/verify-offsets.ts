/**
 * `migrate verify` under the replication carry, where no key carries a version: B's nodes record,
 * per node of A, the offset of A's stream through which they hold A's changes (follow-applier.ts),
 * and A's own offset tells where its stream is. Each side's state of a key is read in one script
 * with that offset (A: INFO's master_repl_offset; B: its record of the key's node of A), B first:
 *
 * - equal at some read: no difference;
 * - B's record at a read is past A's offset at the read before, and A's key (value and expiry) did
 *   not change between those reads: B holds, or should, A's state of that offset. Lasting;
 * - otherwise A keeps changing the key: in flight while B's record advances, lasting when it does not.
 *
 * After `done` (side A closed, B written alone) A's stream is read back from B's lowest record to
 * A's offset now (a PSYNC from A's backlog, replication/link.ts; no full sync is ever asked for):
 * a moving key written there never reached B. The proxies' own bookkeeping is not a change.
 */
import { Placement } from '../../../sharding/migration';
import { SlotOwners } from '../../../sharding/key-space';
import { ReplicationLink } from '../../replication/link';
import { StreamReader } from '../../replication/stream-reader';
import { CommandTable } from '../../commands/table';
import { Reply, decodeReply } from '../../resp/decode-reply';
import { FollowRouter } from '../follow-router';
import { timeBound } from '../time-bound';
import { recordKeyOf } from '../follow-node-keys';
import { keySlot } from '../../../sharding/slot';
import { ownersOf } from '../copy-keys';
import { KeyState, VALUE_LUA, compareStates } from './key-state';
import { NodeClient } from './node-client';
import { RecheckPolicy, Verdict } from './recheck';

/** KEYS[1] the key; on B ARGV[3] its record (undeclared: another slot of the node) and ARGV[2] the field, A's node; ARGV[1] '1': the content too. */
const STATE_AT_SCRIPT = `#!lua flags=no-writes,allow-cross-slot-keys
local k = KEYS[1]
local at
if ARGV[3] ~= '' then
  at = redis.call('HGET', ARGV[3], ARGV[2]) or '- -1'
else
  local i = redis.call('INFO', 'replication')
  at = string.match(i, 'master_replid:(%w+)') .. ' ' .. string.match(i, 'master_repl_offset:(%d+)')
end
local t = redis.call('TYPE', k)['ok']
if t == 'none' then return {t, -2, false, at, -2} end
local ok, exp = pcall(redis.call, 'PEXPIRETIME', k)
if not ok then exp = -3 end
local r = {t, redis.call('PTTL', k), redis.call('DUMP', k), at, exp}
${VALUE_LUA}
return r`;

export interface StateAt {
  state: KeyState;
  /** A's stream: its offset at the read (A), or how far B holds it (B; -1 without a record). */
  replid: string;
  offset: number;
  /** PEXPIRETIME at the read (-1 none, -2 no key), to tell a changed expiry. */
  expireAt: number;
}

export interface OffsetObservation {
  a: StateAt;
  b: StateAt;
  diff: string | null;
}

export interface KeySides {
  key: Buffer;
  a: { addr: string; owners: SlotOwners | null };
  b: { addr: string; owners: SlotOwners | null };
}

const text = (r: Reply | undefined): string => (Buffer.isBuffer(r) ? r.toString('latin1') : String(r));

async function readAt(nodes: NodeClient, side: { addr: string; owners: SlotOwners | null }, key: Buffer, record: { key: string; field: string } | null, withContent: boolean): Promise<StateAt> {
  const r = await nodes.callOn(side.owners, side.addr, ['EVAL', STATE_AT_SCRIPT, '1', key, withContent ? '1' : '0', record?.field ?? '', record?.key ?? '']);
  if (!Array.isArray(r) || r.length < 5) throw new Error(`${side.addr}: unexpected reply to the state script`);
  const type = text(r[0]);
  const [replid, offset] = text(r[3]).split(' ');
  const content = withContent && type !== 'none' ? JSON.stringify(r[5] ?? null, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString('base64') : v)) : null;
  return {
    state: { type, pttl: Number(text(r[1])), dump: Buffer.isBuffer(r[2]) ? r[2] : null, version: 0, changedSinceSnapshot: false, content: type === 'set' || type === 'hash' ? sorted(type, r[5]) : content },
    replid,
    offset: Number(offset),
    expireAt: Number(text(r[4])),
  };
}

/** Sets and hashes in an order independent of their encoding. */
function sorted(type: string, r: Reply | undefined): string | null {
  if (!Array.isArray(r)) return null;
  const norm = (x: Reply): string => JSON.stringify(x, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString('base64') : v));
  if (type === 'set') return r.map(norm).sort().join(',');
  const pairs: string[] = [];
  for (let i = 0; i + 1 < r.length; i += 2) pairs.push(norm([r[i], r[i + 1]]));
  return pairs.sort().join(',');
}

/** B's state with its record of the key's node of A, then A's with its offset (so B's record is at most A's offset). */
export async function observeAt(nodes: NodeClient, s: KeySides, tolerance: number): Promise<OffsetObservation> {
  const names = { a: s.a.addr, b: s.b.addr };
  const read = async (withContent: boolean): Promise<OffsetObservation> => {
    const b = await readOnB(nodes, s, withContent);
    const a = await readAt(nodes, s.a, s.key, null, withContent);
    return { a, b, diff: compareStates(a.state, b.state, names, tolerance) as string | null };
  };
  let o = await read(false);
  if (o.diff === 'by content') {
    o = await read(true);
    if (o.diff === 'by content') o.diff = 'values differ';
  }
  return o;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Tries of a read on a cluster B whose slot map moved (a reshard of B meanwhile). */
const MOVED_TRIES = 10;
const NOT_SERVED = /non.local key|MOVED|ASK/i;

/**
 * The key's state on B with the record of its node of A, both read on the node serving the key now:
 * the record lives in a key of that node's own (recordKeyOf), so a node found by a redirect is
 * asked for its record, not the old owner's (which it refuses as a non-local key).
 */
async function readOnB(nodes: NodeClient, s: KeySides, withContent: boolean): Promise<StateAt> {
  for (let i = 1; ; i++) {
    const addr = s.b.owners?.ownerOf(keySlot(s.key)) ?? s.b.addr;
    try {
      return await readAt(nodes, { addr, owners: s.b.owners }, s.key, { key: recordKeyOf(addr, s.b.owners), field: s.a.addr }, withContent);
    } catch (err) {
      if (s.b.owners === null || i >= MOVED_TRIES || !NOT_SERVED.test(err instanceof Error ? err.message : String(err))) throw err;
      s.b.owners.requestRefresh();
      await sleep(100 * i);
    }
  }
}

const unchanged = (x: StateAt, y: StateAt): boolean =>
  x.replid === y.replid && x.state.type === y.state.type && x.expireAt === y.expireAt && (x.state.dump === null ? y.state.dump === null : y.state.dump !== null && x.state.dump.equals(y.state.dump));

/** Rechecks a key whose first observation differed, by offsets (the module's comment). */
export async function recheckAt(observe: () => Promise<OffsetObservation>, first: OffsetObservation, policy: RecheckPolicy): Promise<Verdict> {
  let prev = first;
  let cur = first;
  for (let i = 1; i <= policy.times; i++) {
    await sleep(policy.firstDelayMs * 2 ** (i - 1));
    prev = cur;
    cur = await observe();
    if (cur.diff === null) return { kind: 'same' };
    if (cur.b.replid === prev.a.replid && cur.b.offset >= prev.a.offset && unchanged(prev.a, cur.a)) {
      return { kind: 'differs', why: `${cur.diff} (B holds A's stream through offset ${cur.b.offset}, past offset ${prev.a.offset}, and A's key did not change between)` };
    }
  }
  if (policy.times > 0 && cur.b.offset > first.b.offset) return { kind: 'in-flight' };
  return { kind: 'differs', why: `${cur.diff ?? ''} (B holds A's stream through offset ${cur.b.offset}${policy.times > 0 ? ', not advancing' : ''}; A at ${cur.a.offset})` };
}

/**
 * What a node of A's stream wrote that B's nodes did not record applying (each key judged by its
 * own node of B's record): the moving keys (all, after a flush), or why that cannot be told.
 */
export type WrittenAfter = { from: number; keys: Set<string>; all: boolean } | { unknown: string };

/** After `done`: per node of A, what its stream wrote after the lowest offset B's nodes recorded for it. */
export async function writtenAfterClose(nodes: NodeClient, placement: Placement): Promise<Map<string, WrittenAfter>> {
  const to = placement.to;
  const out = new Map<string, WrittenAfter>();
  if (to === null) return out;
  const toOwners = ownersOf(to);
  const table = CommandTable.fromCommandReply(decodeReply(await nodes.raw(placement.from.masters()[0], ['COMMAND'])));
  for (const a of placement.from.masters()) {
    let replid: string | null = null;
    const records = new Map<string, number>();
    for (const b of to.masters()) {
      const [id, off] = text(await nodes.callOn(toOwners, b, ['HGET', recordKeyOf(b, toOwners), a])).split(' ');
      if (off === undefined) {
        replid = null;
        break;
      }
      replid = id;
      records.set(b, Number(off));
    }
    out.set(a, replid === null ? { unknown: `${a}: side B holds no full sync of it` } : await streamKeys(nodes, a, replid, records, new FollowRouter(table, placement.from, to, a)));
  }
  return out;
}

function field(info: string, name: string): string {
  return new RegExp(`^${name}:(.*?)\\r?$`, 'm').exec(info)?.[1] ?? '';
}

const READ_BACK_MS = 10_000;

/** The moving keys `a`'s stream wrote after `from`, read back from its backlog (never a full sync: checked first). */
async function streamKeys(nodes: NodeClient, a: string, replid: string, records: Map<string, number>, router: FollowRouter): Promise<WrittenAfter> {
  const from = Math.min(...records.values());
  // A key is late when its command ends past its own node of B's record.
  const late = (to: string, end: number): boolean => end > (records.get(to) ?? -1);
  const info = String(await nodes.call(a, ['INFO', 'replication']));
  const until = Number(field(info, 'master_repl_offset'));
  const written: WrittenAfter & { all: boolean } = { from, keys: new Set<string>(), all: false };
  if (until <= from) return written;
  const sameHistory = field(info, 'master_replid') === replid || (field(info, 'master_replid2') === replid && from <= Number(field(info, 'second_repl_offset')));
  if (!sameHistory || from + 1 < Number(field(info, 'repl_backlog_first_byte_offset'))) {
    return { unknown: `${a}: its backlog no longer holds its stream after offset ${from}, where side B stopped, so whether its keys reached B cannot be told` };
  }
  const opts = nodes.linkOptions();
  const reader = new StreamReader();
  let close = (): void => undefined;
  const result = await timeBound<WrittenAfter>(READ_BACK_MS, (end) => {
    const handshake = opts.handshake.filter((h) => !h.toString('latin1').toUpperCase().includes('READONLY'));
    const link = new ReplicationLink(a, { tls: opts.tls, handshake, connectTimeoutMs: opts.connectTimeoutMs, announcePort: 0, resume: { replid, offset: from } }, {
      fullSync: () => end({ unknown: `${a}: it offered a full sync instead of its stream after offset ${from}` }),
      snapshotBytes: () => undefined,
      snapshotEnd: () => undefined,
      continued: () => undefined,
      streamBytes: (chunk, first) => {
        for (const c of reader.push(chunk, first)) {
          const routed = router.route(c.args);
          if (routed.kind === 'flush') written.all ||= [...records.keys()].some((b) => late(b, c.end));
          else if (routed.kind === 'apply') {
            for (const p of routed.parts) for (const k of p.keys) if (late(p.to, c.end)) written.keys.add(k.toString('latin1'));
          } else if (routed.kind === 'resnapshot') {
            for (const k of routed.keys) if (late(router.ownerInB(k) ?? '', c.end)) written.keys.add(k.toString('latin1'));
          }
        }
        if (first + chunk.length - 1 >= until) end(written);
      },
      lost: (reason) => end({ unknown: `${a}: its stream after offset ${from} could not be read back: ${reason}` }),
    });
    close = () => link.close('read through the offset asked for');
  }, () => ({ unknown: `${a}: its stream after offset ${from} was not read back within ${READ_BACK_MS} ms` }));
  close();
  return result;
}

/** Why a moving key of A did not reach B after `done`, from what its node's stream wrote after B's last record; null when it did. */
export function closedKeyProblemAt(key: Buffer, a: string, written: WrittenAfter | undefined): string | null {
  if (written === undefined || 'unknown' in written) return null;
  if (written.all || written.keys.has(key.toString('latin1'))) return `changed in ${a} after the offset of its stream side B applied there: a write B never got`;
  return null;
}
