/**
 * The bytes of a key that are hashed (SPEC 2), shared by cluster slots and the ring: if the key
 * holds a `{` and a `}` follows with at least one byte between, only the bytes between the first
 * `{` and the first `}` after it; otherwise the whole key.
 *   foo{}{bar} -> whole key    foo{{bar}} -> "{bar"    limit{yes}_10.0.0.1{yes} -> "yes"
 */
const OPEN = 123;
const CLOSE = 125;

/** Below this many bytes a JS loop finds a byte faster than Buffer.indexOf's native call. */
const LOOP_SCAN_MAX = 64;

/** key.indexOf(byte, from), as a byte loop on short keys. */
function indexOfByte(key: Buffer, byte: number, from: number): number {
  const end = key.length;
  if (end - from > LOOP_SCAN_MAX) return key.indexOf(byte, from);
  for (let i = from; i < end; i++) if (key[i] === byte) return i;
  return -1;
}

/** [start, end) of the hashed bytes of `key`. */
export function hashedRange(key: Buffer): [number, number] {
  const open = indexOfByte(key, OPEN, 0);
  if (open < 0) return [0, key.length];
  const close = indexOfByte(key, CLOSE, open + 1);
  if (close < 0 || close === open + 1) return [0, key.length];
  return [open + 1, close];
}

/** The hash tag of `key`, or null when the whole key is hashed. */
export function hashTag(key: Buffer): Buffer | null {
  const [start, end] = hashedRange(key);
  return start === 0 && end === key.length ? null : key.subarray(start, end);
}

/**
 * [start, end) of the hashed bytes under twemproxy's `hash_tag` with opening byte `open` and
 * closing byte `close` (the same rule as above with other delimiters); `tag` null hashes whole keys.
 */
export function taggedRange(key: Buffer, tag: { open: number; close: number } | null): [number, number] {
  if (tag === null) return [0, key.length];
  const open = indexOfByte(key, tag.open, 0);
  if (open < 0) return [0, key.length];
  const close = indexOfByte(key, tag.close, open + 1);
  if (close < 0 || close === open + 1) return [0, key.length];
  return [open + 1, close];
}

/**
 * `hash(key, start, end)` over the bytes taggedRange() names, without building the range: keys
 * are hashed for every request, a split one's ten times, and the pair was an allocation each.
 */
export function hashTagged(key: Buffer, tag: { open: number; close: number } | null, hash: (key: Buffer, start: number, end: number) => number): number {
  if (tag !== null) {
    const open = indexOfByte(key, tag.open, 0);
    if (open >= 0) {
      const close = indexOfByte(key, tag.close, open + 1);
      if (close > open + 1) return hash(key, open + 1, close);
    }
  }
  return hash(key, 0, key.length);
}

/** Redis Cluster's tag delimiters, for hashTagged(). */
export const BRACES = { open: OPEN, close: CLOSE } as const;
