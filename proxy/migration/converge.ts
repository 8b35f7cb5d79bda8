/**
 * How a key's state reaches its new owner during a migration, for the proxy's double-write and for
 * `slotproxy migrate copy` alike: newest state wins, decided by a per-key version, never by timing.
 *
 *   1. SNAPSHOT on the key's node W in ring A, one Lua script, so atomic on W:
 *        v = HINCRBY versions key 1;  payload = DUMP key;  ttl = PTTL key
 *      The proxy queues it right behind the client's write in one MULTI/EXEC, so v is the state
 *      right after that write (proxy/migration/converging-write.ts).
 *   2. APPLY on the key's owner N in ring B, one Lua script, so atomic on N:
 *        if v > HGET versions key: HSET versions key v; RESTORE key ttl payload REPLACE (or DEL
 *        when the key did not exist at the snapshot); else do nothing.
 *
 * Why it converges: every write to the key on W (a client's, through any proxy) is followed by a
 * snapshot taken after it, before the proxy acknowledges the write. Snapshots are numbered on W in
 * the order W took them, and a later snapshot holds W's state after every write before it. N keeps
 * only the highest-numbered snapshot it has seen, whatever order the APPLYs arrive in (two proxies,
 * two clients, the copy tool, retries). So once writes stop, N holds W's final state. Nothing is
 * replayed: INCR, LPUSH, APPEND, EXPIRE and DEL are never run twice, they are copied as results. A
 * key deleted on W is deleted on N by a snapshot with no payload, so the copy tool can never
 * resurrect it: its snapshot is older than the deletion's and is refused.
 *
 * Entering `done` (B only), a proxy first sets FENCE_KEY on every B node; from then on APPLY takes
 * nothing and answers with the version N last took. A proxy still double-writing learns from that
 * whether its write reached N (an applied snapshot numbered >= its own was taken after it) and,
 * when it did not, runs the write once on N itself.
 *
 * A snapshot also records a fingerprint of the state it took (DIGESTS_KEY: the DUMP's SHA1 and the
 * absolute expiry). The change copier (change-copier.ts) takes its snapshots "only if changed": a
 * key whose state is still the one a snapshot already carried needs no new version and no APPLY,
 * so a proxy's own converging write, reported again by the node's change feed, costs one script
 * on A and nothing on B.
 *
 * On a ring node the versions live in one hash per node (VERSIONS_KEY) and the fence is one key.
 * On a Redis Cluster node a script may only touch keys of one slot, so both are per slot, named
 * with a hash tag of the key's slot (`__slotproxy:migration:versions:{tag}`, sharding/slot-tags.ts).
 * `migrate cleanup` removes all of it.
 */
import { createHash } from 'node:crypto';
import { Reply, decodeReply, errorText } from '../resp/decode-reply';
import { arrayElements } from '../resp/reply-framer';
import { keySlot } from '../../sharding/slot';
import { slotTag } from '../../sharding/slot-tags';

/** Per-node hash: key -> version of the newest state this node has had (or taken) for it. */
export const VERSIONS_KEY = '__slotproxy:migration:versions';
/** Keys of slotproxy's own bookkeeping, never copied or compared. */
export const BOOKKEEPING_PREFIX = '__slotproxy:migration:';
/** Set on ring B's nodes when the first proxy enters `done`: from then on B takes no snapshot. */
export const FENCE_KEY = `${BOOKKEEPING_PREFIX}fence`;

/** Per-node hash: key -> fingerprint of the state the newest snapshot took (side A only). */
export const DIGESTS_KEY = `${BOOKKEEPING_PREFIX}digests`;

/**
 * KEYS: the key, its versions hash, its digests hash. ARGV[1] '1': only if the key changed since
 * the last snapshot (else 0 and nothing recorded). A key's first version is the node's clock in
 * microseconds, not 1: after a FLUSHALL of the node (its bookkeeping gone with it) new versions
 * still outnumber those side B already holds. The fingerprint holds the expiry as an absolute
 * time (PEXPIRETIME, Redis 7.0); where that is missing, the remaining PTTL, which only makes an
 * unchanged key look changed (one APPLY too many, never one too few).
 */
/** One key's snapshot, shared by the single and the batched script (their fingerprints must agree). */
const SNAPSHOT_FUNCTION = `local clock
local function snapshot(key, versions, digests, ifChanged)
  local d = redis.call('DUMP', key)
  local f = 'gone'
  local ok, at = true, -1
  if d then
    ok, at = pcall(redis.call, 'PEXPIRETIME', key)
    if not ok then at = 'p' .. redis.call('PTTL', key) end
    f = string.sub(redis.sha1hex(d), 1, 20) .. ':' .. at
  end
  if ifChanged and redis.call('HGET', digests, key) == f then return 0 end
  redis.call('HSET', digests, key, f)
  local v = redis.call('HINCRBY', versions, key, 1)
  if v == 1 then
    -- One clock reading serves every key of the script.
    clock = clock or redis.call('TIME')
    local first = clock[1] .. string.format('%06d', tonumber(clock[2]))
    redis.call('HSET', versions, key, first)
    v = tonumber(first)
  end
  if not d then return {v, '', -2} end
  -- No expiry (PEXPIRETIME -1): no PTTL to ask.
  if ok and at == -1 then return {v, d, -1} end
  return {v, d, redis.call('PTTL', key)}
end`;

export const SNAPSHOT_SCRIPT = `${SNAPSHOT_FUNCTION}
return snapshot(KEYS[1], KEYS[2], KEYS[3], ARGV[1] == '1')`;

/**
 * The change feeds' batch (feed-copy.ts): KEYS = versions hash, digests hash, then keys that share
 * them (one ring node, or one slot of a cluster); ARGV[1] '1': only the keys that changed since
 * their last snapshot, '0': every key (while writes are answered after side A, nearly every key a
 * feed names has changed, and the fingerprint's HGET would only cost). The reply is flat, three
 * elements per key (version, payload, ttl; version 0 for a key that had not changed), so no table
 * per key is built and converted (measured: no change beyond the machine's spread, docs/migration.md
 * "Cost").
 */
export const SNAPSHOT_CHANGED_SCRIPT = `${SNAPSHOT_FUNCTION}
local out = {}
local ifChanged = ARGV[1] == '1'
for i = 3, #KEYS do
  local s = snapshot(KEYS[i], KEYS[1], KEYS[2], ifChanged)
  local at = (i - 3) * 3
  if s == 0 then
    out[at + 1], out[at + 2], out[at + 3] = 0, '', 0
  else
    out[at + 1], out[at + 2], out[at + 3] = s[1], s[2], s[3]
  end
end
return out`;

/**
 * A converging burst's snapshots (converging-batch.ts), inside its MULTI right after its writes:
 * KEYS = versions hash, digests hash, then keys that share them; per key, its snapshot.
 */
export const SNAPSHOT_MANY_SCRIPT = `${SNAPSHOT_FUNCTION}
local out = {}
for i = 3, #KEYS do out[i - 2] = snapshot(KEYS[i], KEYS[1], KEYS[2], false) end
return out`;

/** 1: applied; 0: B already had this version or a newer one; -1 - version: fenced (done). */
export const APPLY_SCRIPT = `local cur = tonumber(redis.call('HGET', KEYS[2], KEYS[1]) or '0')
if redis.call('EXISTS', KEYS[3]) == 1 then return -1 - cur end
local v = tonumber(ARGV[1])
if v <= cur then return 0 end
redis.call('HSET', KEYS[2], KEYS[1], ARGV[1])
if ARGV[2] == '0' then
  redis.call('DEL', KEYS[1])
else
  redis.call('RESTORE', KEYS[1], ARGV[4], ARGV[3], 'REPLACE')
end
return 1`;

export interface Snapshot {
  version: number;
  /** DUMP payload, or null when the key did not exist. */
  payload: Buffer | null;
  /** Remaining time to live in ms; 0 for none. */
  ttlMs: number;
}

/** How a side names the bookkeeping that sits beside a key (one name per node, or one per slot). */
export interface Bookkeeping {
  versionsKey(key: Buffer): string;
  digestsKey(key: Buffer): string;
  fenceKey(key: Buffer): string;
}

export const RING_BOOKKEEPING: Bookkeeping = Object.freeze({
  versionsKey: () => VERSIONS_KEY,
  digestsKey: () => DIGESTS_KEY,
  fenceKey: () => FENCE_KEY,
});

/** `name` as a key of `slot`. */
export function inSlot(name: string, slot: number): string {
  return `${name}:{${slotTag(slot)}}`;
}

/** `name` in every slot, built on first use (the feeds' scripts name one per key they copy). */
function perSlot(name: string): (key: Buffer) => string {
  let names: (string | undefined)[] | null = null;
  return (key) => {
    const slot = keySlot(key);
    names ??= new Array<string | undefined>(16384);
    return (names[slot] ??= inSlot(name, slot));
  };
}

export const CLUSTER_BOOKKEEPING: Bookkeeping = Object.freeze({
  versionsKey: perSlot(VERSIONS_KEY),
  digestsKey: perSlot(DIGESTS_KEY),
  fenceKey: perSlot(FENCE_KEY),
});

export function bookkeepingOf(kind: 'ring' | 'cluster'): Bookkeeping {
  return kind === 'cluster' ? CLUSTER_BOOKKEEPING : RING_BOOKKEEPING;
}

const SNAPSHOT_SHA = createHash('sha1').update(SNAPSHOT_SCRIPT).digest('hex');
const SNAPSHOT_CHANGED_SHA = createHash('sha1').update(SNAPSHOT_CHANGED_SCRIPT).digest('hex');
const SNAPSHOT_MANY_SHA = createHash('sha1').update(SNAPSHOT_MANY_SCRIPT).digest('hex');
const APPLY_SHA = createHash('sha1').update(APPLY_SCRIPT).digest('hex');

/** The script by body (EVAL), or by SHA1 (EVALSHA, once the script is loaded). `ifChanged`: see SNAPSHOT_SCRIPT. */
export function snapshotCommand(key: Buffer, bySha = false, book: Bookkeeping = RING_BOOKKEEPING, ifChanged = false): (Buffer | string)[] {
  return [bySha ? 'EVALSHA' : 'EVAL', bySha ? SNAPSHOT_SHA : SNAPSHOT_SCRIPT, '3', key, book.versionsKey(key), book.digestsKey(key), ifChanged ? '1' : '0'];
}

/** Snapshots of `keys` (only those that changed, with `ifChanged`); they share their bookkeeping (one node or one slot). */
export function snapshotChangedCommand(keys: readonly Buffer[], bySha = false, book: Bookkeeping = RING_BOOKKEEPING, ifChanged = true): (Buffer | string)[] {
  return [bySha ? 'EVALSHA' : 'EVAL', bySha ? SNAPSHOT_CHANGED_SHA : SNAPSHOT_CHANGED_SCRIPT, String(2 + keys.length), book.versionsKey(keys[0]), book.digestsKey(keys[0]), ...keys, ifChanged ? '1' : '0'];
}

/** Snapshots of `keys`, which share their bookkeeping (one node or one slot). */
export function snapshotManyCommand(keys: readonly Buffer[], bySha = false, book: Bookkeeping = RING_BOOKKEEPING): (Buffer | string)[] {
  return [bySha ? 'EVALSHA' : 'EVAL', bySha ? SNAPSHOT_MANY_SHA : SNAPSHOT_MANY_SCRIPT, String(2 + keys.length), book.versionsKey(keys[0]), book.digestsKey(keys[0]), ...keys];
}

/** SNAPSHOT_MANY's reply: `count` snapshots, in key order. */
export function parseSnapshots(frame: Buffer, count: number): Snapshot[] {
  const err = errorText(frame);
  if (err !== null) throw new Error(err);
  const elements = arrayElements(frame);
  if (elements === null || elements.length !== count) throw new Error('unexpected snapshot reply');
  return elements.map(parseSnapshot);
}

/** The batch's reply (flat, three elements per key): per key, its snapshot, or null when it had not changed. */
export function parseSnapshotsIfChanged(frame: Buffer, count: number): (Snapshot | null)[] {
  const err = errorText(frame);
  if (err !== null) throw new Error(err);
  const r = decodeReply(frame, true);
  if (!Array.isArray(r) || r.length !== count * 3) throw new Error('unexpected snapshot reply');
  const out = new Array<Snapshot | null>(count);
  for (let i = 0; i < count; i++) {
    const version = toNumber(r[i * 3]);
    const payload = r[i * 3 + 1];
    const pttl = toNumber(r[i * 3 + 2]);
    out[i] = version === 0 ? null : snapshotOf(version, Buffer.isBuffer(payload) && pttl !== -2 ? payload : null, pttl);
  }
  return out;
}

export function applyCommand(key: Buffer, s: Snapshot, bySha = false, book: Bookkeeping = RING_BOOKKEEPING): (Buffer | string)[] {
  return [
    bySha ? 'EVALSHA' : 'EVAL', bySha ? APPLY_SHA : APPLY_SCRIPT, '3', key, book.versionsKey(key), book.fenceKey(key),
    String(s.version), s.payload === null ? '0' : '1', s.payload ?? '', String(s.ttlMs),
  ];
}

/**
 * The change feeds' APPLY of keys sharing a node and a fence on B (one ring node, or one slot):
 * KEYS = versions hash, fence, keys; ARGV = per key version, has-payload, payload, ttl. All of
 * them, or none: a script's keys (one hash tag) reach B on the same side of the fence.
 */
export const APPLY_MANY_SCRIPT = `local fenced = redis.call('EXISTS', KEYS[2]) == 1
local out = {}
for i = 3, #KEYS do
  local key = KEYS[i]
  local a = (i - 3) * 4
  local cur = tonumber(redis.call('HGET', KEYS[1], key) or '0')
  if fenced then
    out[i - 2] = -1 - cur
  elseif tonumber(ARGV[a + 1]) <= cur then
    out[i - 2] = 0
  else
    redis.call('HSET', KEYS[1], key, ARGV[a + 1])
    if ARGV[a + 2] == '0' then
      redis.call('DEL', key)
    else
      redis.call('RESTORE', key, ARGV[a + 4], ARGV[a + 3], 'REPLACE')
    end
    out[i - 2] = 1
  end
end
return out`;
const APPLY_MANY_SHA = createHash('sha1').update(APPLY_MANY_SCRIPT).digest('hex');

export function applyManyCommand(keys: readonly Buffer[], snaps: readonly Snapshot[], bySha = false, book: Bookkeeping = RING_BOOKKEEPING): (Buffer | string)[] {
  const args: (Buffer | string)[] = [bySha ? 'EVALSHA' : 'EVAL', bySha ? APPLY_MANY_SHA : APPLY_MANY_SCRIPT, String(2 + keys.length), book.versionsKey(keys[0]), book.fenceKey(keys[0]), ...keys];
  for (const s of snaps) args.push(String(s.version), s.payload === null ? '0' : '1', s.payload ?? '', String(s.ttlMs));
  return args;
}

/**
 * A converging burst's APPLY on a Redis Cluster side B (apply-burst.ts): keys of one node, of any
 * of its slots, each with its slot's bookkeeping. KEYS[1]: the first key (the request is routed by
 * it); ARGV: per key its name, versions hash, fence, version, has-payload, payload, ttl. The keys
 * after the first are not declared, so a node that does not serve one of them fails the script
 * there (the caller then applies them per slot). Answers as APPLY_MANY does.
 */
export const APPLY_NODE_SCRIPT = `local out = {}
for i = 0, #ARGV / 7 - 1 do
  local a = i * 7
  local key, versions = ARGV[a + 1], ARGV[a + 2]
  local cur = tonumber(redis.call('HGET', versions, key) or '0')
  if redis.call('EXISTS', ARGV[a + 3]) == 1 then
    out[i + 1] = -1 - cur
  elseif tonumber(ARGV[a + 4]) <= cur then
    out[i + 1] = 0
  else
    redis.call('HSET', versions, key, ARGV[a + 4])
    if ARGV[a + 5] == '0' then
      redis.call('DEL', key)
    else
      redis.call('RESTORE', key, ARGV[a + 7], ARGV[a + 6], 'REPLACE')
    end
    out[i + 1] = 1
  end
end
return out`;
const APPLY_NODE_SHA = createHash('sha1').update(APPLY_NODE_SCRIPT).digest('hex');

export function applyNodeCommand(keys: readonly Buffer[], snaps: readonly Snapshot[], bySha = false, book: Bookkeeping = CLUSTER_BOOKKEEPING): (Buffer | string)[] {
  const args: (Buffer | string)[] = [bySha ? 'EVALSHA' : 'EVAL', bySha ? APPLY_NODE_SHA : APPLY_NODE_SCRIPT, '1', keys[0]];
  keys.forEach((key, i) => {
    const s = snaps[i];
    args.push(key, book.versionsKey(key), book.fenceKey(key), String(s.version), s.payload === null ? '0' : '1', s.payload ?? '', String(s.ttlMs));
  });
  return args;
}

export function parseApplyMany(frame: Buffer, count: number): ApplyOutcome[] {
  const err = errorText(frame);
  if (err !== null) throw new Error(err);
  const r = decodeReply(frame, true);
  if (!Array.isArray(r) || r.length !== count) throw new Error('unexpected apply reply');
  return r.map((n) => {
    const v = toNumber(n);
    return v === 1 ? { kind: 'applied' } : v === 0 ? { kind: 'older' } : { kind: 'fenced', version: -1 - v };
  });
}

export type ApplyOutcome =
  | { kind: 'applied' }
  | { kind: 'older' }
  /** Ring B is fenced (done); `version` is the last snapshot it took for the key. */
  | { kind: 'fenced'; version: number };

export function parseApply(frame: Buffer): ApplyOutcome {
  const err = errorText(frame);
  if (err !== null) throw new Error(err);
  if (frame[0] !== 58 /* : */) throw new Error('unexpected apply reply');
  const n = Number(frame.toString('latin1', 1, frame.length - 2));
  if (n === 1) return { kind: 'applied' };
  if (n === 0) return { kind: 'older' };
  return { kind: 'fenced', version: -1 - n };
}

/** A snapshot taken "only if changed": null when the key is still as the last snapshot took it. */
export function parseSnapshotIfChanged(frame: Buffer): Snapshot | null {
  if (frame.length === 4 && frame.toString('latin1') === ':0\r\n') return null;
  return parseSnapshot(frame);
}

/**
 * `*3 :version $payload :pttl`, read by hand (once per double-written key). A missing key comes as
 * an empty payload with PTTL -2: no `false` in the script's reply, whose encoding would differ
 * between RESP2 and RESP3 lanes.
 */
export function parseSnapshot(frame: Buffer): Snapshot {
  const err = errorText(frame);
  if (err !== null) throw new Error(err);
  if (frame.toString('latin1', 0, 4) !== '*3\r\n') return parseSnapshotSlowly(frame);
  let pos = 4;
  const line = (): string => {
    const end = frame.indexOf('\r\n', pos);
    if (end < 0) throw new Error('unexpected snapshot reply');
    const text = frame.toString('latin1', pos, end);
    pos = end + 2;
    return text;
  };
  const v = line();
  if (v[0] !== ':') return parseSnapshotSlowly(frame);
  const lenLine = line();
  let payload: Buffer | null = null;
  // `$-1` in RESP2, `_` (null) in RESP3: the key did not exist.
  if (lenLine === '$-1' || lenLine === '_') payload = null;
  else if (lenLine[0] === '$') {
    const len = Number(lenLine.slice(1));
    payload = frame.subarray(pos, pos + len);
    pos += len + 2;
  } else return parseSnapshotSlowly(frame);
  const t = line();
  if (t[0] !== ':') return parseSnapshotSlowly(frame);
  const pttl = Number(t.slice(1));
  return snapshotOf(Number(v.slice(1)), pttl === -2 ? null : payload, pttl);
}

function snapshotOf(version: number, payload: Buffer | null, pttl: number): Snapshot {
  // PTTL -1: no expiry. 0 can be seen in the last millisecond; RESTORE's 0 would mean "forever".
  return { version, payload, ttlMs: payload === null ? 0 : pttl === -1 ? 0 : Math.max(1, pttl) };
}

function parseSnapshotSlowly(frame: Buffer): Snapshot {
  const r = decodeReply(frame, true);
  if (!Array.isArray(r) || r.length !== 3) throw new Error('unexpected snapshot reply');
  const pttl = toNumber(r[2]);
  return snapshotOf(toNumber(r[0]), Buffer.isBuffer(r[1]) && pttl !== -2 ? r[1] : null, pttl);
}

function toNumber(r: Reply): number {
  if (typeof r === 'number') return r;
  if (Buffer.isBuffer(r)) return Number(r.toString('latin1'));
  throw new Error('unexpected snapshot reply');
}

export function isBookkeepingKey(key: Buffer): boolean {
  // Checked for every key a change feed names: the first byte rules out nearly all of them.
  return key.length >= BOOKKEEPING_PREFIX.length && key[0] === PREFIX_BYTES[0] && key.compare(PREFIX_BYTES, 0, PREFIX_BYTES.length, 0, PREFIX_BYTES.length) === 0;
}
const PREFIX_BYTES = Buffer.from(BOOKKEEPING_PREFIX, 'latin1');
