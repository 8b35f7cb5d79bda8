// The double-write floor's `--versions` (bench/mux-floor.ts): slotproxy's SNAPSHOT and APPLY
// (proxy/migration/converge.ts) at their least, batched as slotproxy batches them: one script on a
// node of A per turn for the keys its writes of that turn moved (`HINCRBY versions key 1`, `DUMP
// key`), one script on a node of B per turn restoring each key whose version is above the one it
// holds. No fingerprints, no MULTI, no TTLs, no fence. Keys travel as RESP bulks (`$len\r\nkey\r\n`).
import { createHash } from 'node:crypto';
import { crAt, frameLength, slotOf } from './floor-resp';

const SNAPSHOT = "local out = {} for i = 2, #KEYS do out[i - 1] = {redis.call('HINCRBY', KEYS[1], KEYS[i], 1), redis.call('DUMP', KEYS[i])} end return out";
// Keys and their versions hashes as arguments: a cluster node's keys of several slots in one call.
const APPLY =
  "for i = 1, #ARGV, 4 do local k, h, v, d = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3] " +
  "if tonumber(v) > tonumber(redis.call('HGET', h, k) or '0') then redis.call('HSET', h, k, v) " +
  "if d == '' then redis.call('DEL', k) else redis.call('RESTORE', k, 0, d, 'REPLACE') end end end return 1";

const bulk = (text: string): string => `$${Buffer.byteLength(text)}\r\n${text}\r\n`;
const sha1 = (text: string): string => createHash('sha1').update(text).digest('hex');
const scriptLoad = (text: string): Buffer => Buffer.from(`*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n${bulk(text)}`);
/** Sent to every node before its first EVALSHA, on the same connection. */
export const SCRIPT_LOADS = [scriptLoad(SNAPSHOT), scriptLoad(APPLY)];
const SNAPSHOT_SHA = Buffer.from(bulk(sha1(SNAPSHOT)));
const APPLY_SHA = Buffer.from(bulk(sha1(APPLY)));
const EVALSHA = Buffer.from('$7\r\nEVALSHA\r\n');
const VERSIONS = Buffer.from(bulk('floor:versions'));
const EMPTY_BULK = Buffer.from('$0\r\n\r\n');
const ZERO_KEYS = Buffer.from('$1\r\n0\r\n');

/** EVALSHA SNAPSHOT of these keys (bulks). */
export function snapshotBatch(keys: readonly Buffer[]): Buffer {
  const n = String(keys.length + 1);
  return Buffer.concat([Buffer.from(`*${keys.length + 4}\r\n`), EVALSHA, SNAPSHOT_SHA, Buffer.from(`$${n.length}\r\n${n}\r\n`), VERSIONS, ...keys]);
}

export interface Snapshot {
  /** The version's digits. */
  v: Buffer;
  /** DUMP's payload as a bulk; an empty bulk when the key is gone. */
  dump: Buffer;
}

/** SNAPSHOT's reply, `*n` of `*2 :v $dump` (or `$-1`), in key order. */
export function parseSnapshots(reply: Buffer): Snapshot[] {
  const out: Snapshot[] = [];
  let at = crAt(reply, 0) + 2;
  while (at < reply.length) {
    const vAt = crAt(reply, at) + 2; // past `*2`
    const vEnd = crAt(reply, vAt);
    const dumpAt = vEnd + 2;
    const len = frameLength(reply, dumpAt);
    out.push({ v: reply.subarray(vAt + 1, vEnd), dump: reply[dumpAt + 1] === 45 ? EMPTY_BULK : reply.subarray(dumpAt, dumpAt + len) });
    at = dumpAt + len;
  }
  return out;
}

/** EVALSHA APPLY of snapshots of keys (bulks) of one node of B; on a cluster each key's versions hash is in its slot. */
export function applyBatch(keys: readonly Buffer[], snapshots: readonly Snapshot[], inCluster: boolean): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${3 + 4 * keys.length}\r\n`), EVALSHA, APPLY_SHA, ZERO_KEYS];
  keys.forEach((key, i) => {
    const v = snapshots[i].v;
    const versions = inCluster ? slotVersions(slotOf(key, crAt(key, 0) + 2, key.length - 2)) : VERSIONS;
    parts.push(key, versions, Buffer.from(`$${v.length}\r\n`), v, CRLF, snapshots[i].dump);
  });
  return Buffer.concat(parts);
}
const CRLF = Buffer.from('\r\n');

/** A versions hash per slot of a cluster B, named with a hash tag of that slot (found once, by trying numbers). */
let slotTags: Buffer[] | null = null;
function slotVersions(slot: number): Buffer {
  if (slotTags === null) {
    const tags = new Array<Buffer>(16384);
    for (let i = 0, found = 0; found < 16384; i++) {
      const tag = Buffer.from(String(i));
      const s = slotOf(tag, 0, tag.length);
      if (tags[s] === undefined) {
        tags[s] = Buffer.from(bulk(`floor:versions:{${i}}`));
        found++;
      }
    }
    slotTags = tags;
  }
  return slotTags[slot];
}
