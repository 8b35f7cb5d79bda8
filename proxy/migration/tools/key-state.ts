/**
 * One key's state on one side, for `migrate verify`: type, TTL, DUMP and the version the side's
 * bookkeeping holds for it (on A the last snapshot taken, on B the last one applied; see
 * ../converge.ts), all read in one script so they belong to the same instant. Under live writes a
 * value read apart from its version could not be told from a copy in flight. On side A the script
 * also tells whether the key changed since its last snapshot (a write the change feed has yet to
 * copy), from the fingerprint that snapshot recorded.
 */
import { SlotOwners } from '../../../sharding/key-space';
import { Bookkeeping } from '../converge';
import { Reply } from '../../resp/decode-reply';
import { NodeClient } from './node-client';

/**
 * A key's fingerprint `f` (and its DUMP `d`), computed as SNAPSHOT_SCRIPT records it (checked
 * against a real node in test/integration/migration-verify-live.test.ts).
 */
export const FINGERPRINT_LUA = `local d = redis.call('DUMP', KEYS[1])
local f = 'gone'
if d then
  local ok, at = pcall(redis.call, 'PEXPIRETIME', KEYS[1])
  if not ok then at = 'p' .. redis.call('PTTL', KEYS[1]) end
  f = string.sub(redis.sha1hex(d), 1, 20) .. ':' .. at
end`;

/**
 * KEYS[1] the key, KEYS[2] its side's versions hash, on side A KEYS[3] its digests hash (same node,
 * same slot); ARGV[1] '1': the content too. {type, pttl, dump, version, changed since the last snapshot, content}.
 */
/** Lua: with ARGV[1] '1', the value of key `k` of type `t` as r[6], for a readable difference. */
export const VALUE_LUA = `if ARGV[1] == '1' then
  if t == 'string' then r[6] = redis.call('GET', k)
  elseif t == 'list' then r[6] = redis.call('LRANGE', k, 0, -1)
  elseif t == 'set' then r[6] = redis.call('SMEMBERS', k)
  elseif t == 'hash' then r[6] = redis.call('HGETALL', k)
  elseif t == 'zset' then r[6] = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  elseif t == 'stream' then r[6] = redis.call('XRANGE', k, '-', '+')
  end
end`;

export const STATE_SCRIPT = `${FINGERPRINT_LUA}
local k = KEYS[1]
local t = redis.call('TYPE', k)['ok']
local v = tonumber(redis.call('HGET', KEYS[2], k) or '0')
local changed = 0
if KEYS[3] and redis.call('HGET', KEYS[3], k) ~= f then changed = 1 end
if t == 'none' then return {t, -2, false, v, changed} end
local r = {t, redis.call('PTTL', k), d, v, changed}
${VALUE_LUA}
return r`;

/** Where a side holds a key: its node, the side's slot map when it is a cluster, its bookkeeping. */
export interface SideOfKey {
  addr: string;
  owners: SlotOwners | null;
  book: Bookkeeping;
  /** Side A, where snapshots are taken (and their fingerprints kept). */
  source: boolean;
}

export interface KeyState {
  type: string;
  pttl: number;
  dump: Buffer | null;
  /** The side's bookkeeping version for the key, 0 when it has none. */
  version: number;
  /** Side A only: the key is not in the state its last snapshot took (or never had one). */
  changedSinceSnapshot: boolean;
  /** The value in a form independent of its encoding; null unless asked for. */
  content: string | null;
}

export async function readState(nodes: NodeClient, side: SideOfKey, key: Buffer, withContent: boolean): Promise<KeyState> {
  const keys = side.source ? [key, side.book.versionsKey(key), side.book.digestsKey(key)] : [key, side.book.versionsKey(key)];
  const r = await nodes.callOn(side.owners, side.addr, ['EVAL', STATE_SCRIPT, String(keys.length), ...keys, withContent ? '1' : '0']);
  if (!Array.isArray(r) || r.length < 5) throw new Error(`${side.addr}: unexpected reply to the state script`);
  const type = text(r[0]);
  return {
    type,
    pttl: Number(text(r[1])),
    dump: Buffer.isBuffer(r[2]) ? r[2] : null,
    version: Number(text(r[3])),
    changedSinceSnapshot: text(r[4]) === '1',
    content: withContent && type !== 'none' ? canonical(type, r[5] ?? null) : null,
  };
}

function text(r: Reply): string {
  return Buffer.isBuffer(r) ? r.toString('latin1') : String(r);
}

const norm = (r: Reply): string => JSON.stringify(r, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString('base64') : v));

/** Sets and hashes come in an order that depends on the encoding: sorted here. */
function canonical(type: string, r: Reply): string {
  const items = Array.isArray(r) ? r : [];
  switch (type) {
    case 'set':
      return items.map(norm).sort().join(',');
    case 'hash': {
      const pairs: string[] = [];
      for (let i = 0; i + 1 < items.length; i += 2) pairs.push(norm([items[i], items[i + 1]]));
      return pairs.sort().join(',');
    }
    case 'string':
    case 'list':
    case 'zset':
    case 'stream':
      return norm(r);
    default:
      return `unknown type ${type}`;
  }
}

/**
 * Why the two states differ (null when they match). 'by content' when the DUMPs differ but the
 * states were read without their content: the encodings may differ, so read again with it.
 */
export function compareStates(a: KeyState, b: KeyState, names: { a: string; b: string }, ttlToleranceMs: number): string | null | 'by content' {
  if (a.type === 'none' && b.type === 'none') return null;
  if (a.type === 'none') return `in ${names.b} but not in ${names.a} (resurrected or never deleted)`;
  if (b.type === 'none') return `missing in ${names.b}`;
  if (a.type !== b.type) return `type ${a.type} in ${names.a}, ${b.type} in ${names.b}`;
  if (a.dump === null || b.dump === null || !a.dump.equals(b.dump)) {
    if (a.content === null || b.content === null) return 'by content';
    if (a.content !== b.content) return `${a.type} values differ`;
  }
  const ttl = `TTL ${a.pttl} ms in ${names.a}, ${b.pttl} ms in ${names.b}`;
  if ((a.pttl < 0) !== (b.pttl < 0)) return ttl;
  if (a.pttl >= 0 && Math.abs(a.pttl - b.pttl) > ttlToleranceMs) return ttl;
  return null;
}

/** The same state, as far as a recheck can tell (PTTL aside, which runs down by itself). */
export function sameState(x: KeyState, y: KeyState): boolean {
  return x.version === y.version && x.type === y.type && (x.dump === null ? y.dump === null : y.dump !== null && x.dump.equals(y.dump));
}
