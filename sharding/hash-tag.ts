/**
 * The bytes of a key that are hashed (SPEC 2), shared by cluster slots and the ring: if the key
 * holds a `{` and a `}` follows with at least one byte between, only the bytes between the first
 * `{` and the first `}` after it; otherwise the whole key.
 *   foo{}{bar} -> whole key    foo{{bar}} -> "{bar"    limit{yes}_10.0.0.1{yes} -> "yes"
 */
const OPEN = 123;
const CLOSE = 125;

/** [start, end) of the hashed bytes of `key`. */
export function hashedRange(key: Buffer): [number, number] {
  const open = key.indexOf(OPEN);
  if (open < 0) return [0, key.length];
  const close = key.indexOf(CLOSE, open + 1);
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
  const open = key.indexOf(tag.open);
  if (open < 0) return [0, key.length];
  const close = key.indexOf(tag.close, open + 1);
  if (close < 0 || close === open + 1) return [0, key.length];
  return [open + 1, close];
}
