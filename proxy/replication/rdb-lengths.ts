// The RDB's lengths and strings (redis/redis src/rdb.c rdbLoadLenByRef, rdbGenericLoadStringObject),
// read from a buffer that may stop anywhere: each reader answers the position after what it read,
// or NEED when the buffer stops first (with `scan.need`, the position the buffer must reach before
// trying again), or BAD when the bytes cannot be an RDB (with `scan.error`). Nothing here allocates
// except decodeString, which the reader calls only for keys, AUX fields and function libraries.
//
// A length opens with a byte whose top two bits say its size:
//   00LLLLLL            6 bits
//   01LLLLLL LLLLLLLL   14 bits, big-endian
//   10000000 + 4 bytes  32 bits, big-endian;  10000001 + 8 bytes  64 bits, big-endian
//   11EEEEEE            not a length: a string in a special encoding E follows
// A string is a length and that many bytes, or a special encoding: E = 0, 1, 2 an integer in 1, 2
// or 4 bytes little-endian (the string is its decimal form), E = 3 LZF: the compressed length,
// the uncompressed length, then the compressed bytes.

import { lzfDecompress } from './lzf';

/** The buffer stops before the item ends: wait for `scan.need`. */
export const NEED = -1;
/** The bytes are not a valid RDB item: `scan.error` says why. */
export const BAD = -2;

const ENC_INT8 = 0;
const ENC_INT16 = 1;
const ENC_INT32 = 2;
const ENC_LZF = 3;
const LEN_32BIT = 0x80;
const LEN_64BIT = 0x81;
const TWO_POW_32 = 4294967296;

/** What the last reader found besides its end position; one per reader, reused for every item. */
export interface Scan {
  /** The length read, or the special encoding when `special`. */
  value: number;
  /** The length byte announced a special string encoding rather than a length. */
  special: boolean;
  /** On NEED: the position the buffer must reach before the item can be read. */
  need: number;
  /** On BAD: what is wrong. */
  error: string;
}

export function newScan(): Scan {
  return { value: 0, special: false, need: 0, error: '' };
}

function needs(scan: Scan, position: number): number {
  scan.need = position;
  return NEED;
}

function bad(scan: Scan, error: string): number {
  scan.error = error;
  return BAD;
}

/** Reads a length (or a special-encoding marker) at `pos` into `scan.value` / `scan.special`. */
export function readLength(buf: Buffer, pos: number, end: number, scan: Scan): number {
  if (pos >= end) return needs(scan, pos + 1);
  const first = buf[pos];
  const kind = first >>> 6;
  scan.special = false;
  if (kind === 0) {
    scan.value = first;
    return pos + 1;
  }
  if (kind === 1) {
    if (pos + 2 > end) return needs(scan, pos + 2);
    scan.value = ((first & 0x3f) << 8) | buf[pos + 1];
    return pos + 2;
  }
  if (kind === 3) {
    scan.special = true;
    scan.value = first & 0x3f;
    return pos + 1;
  }
  if (first === LEN_32BIT) {
    if (pos + 5 > end) return needs(scan, pos + 5);
    scan.value = buf.readUInt32BE(pos + 1);
    return pos + 5;
  }
  if (first === LEN_64BIT) {
    if (pos + 9 > end) return needs(scan, pos + 9);
    // Beyond 2^53 the value is not exact; no count or string can be that long, and the only
    // lengths that large (module ids) are skipped or read by readModuleId.
    scan.value = buf.readUInt32BE(pos + 1) * TWO_POW_32 + buf.readUInt32BE(pos + 5);
    return pos + 9;
  }
  return bad(scan, `unknown RDB length encoding 0x${first.toString(16)}`);
}

/** Reads a length that counts something that follows (elements, bytes): a special marker is BAD. */
export function readCount(buf: Buffer, pos: number, end: number, scan: Scan): number {
  const next = readLength(buf, pos, end, scan);
  if (next >= 0 && scan.special) return bad(scan, `RDB string encoding 0x${buf[pos].toString(16)} where a length belongs`);
  if (next >= 0 && scan.value > Number.MAX_SAFE_INTEGER) return bad(scan, `RDB length ${scan.value} too large`);
  return next;
}

/** Skips a length whose value is not needed (it may be any 64-bit number: a stream id's half). */
export function skipLength(buf: Buffer, pos: number, end: number, scan: Scan): number {
  const next = readLength(buf, pos, end, scan);
  if (next >= 0 && scan.special) return bad(scan, `RDB string encoding 0x${buf[pos].toString(16)} where a length belongs`);
  return next;
}

/** Skips one string at `pos`, whatever its encoding; answers the position after it. */
export function skipString(buf: Buffer, pos: number, end: number, scan: Scan): number {
  const body = readLength(buf, pos, end, scan);
  if (body < 0) return body;
  if (!scan.special) return reach(body + scan.value, end, scan);
  switch (scan.value) {
    case ENC_INT8:
      return reach(body + 1, end, scan);
    case ENC_INT16:
      return reach(body + 2, end, scan);
    case ENC_INT32:
      return reach(body + 4, end, scan);
    case ENC_LZF: {
      const afterCompressed = readCount(buf, body, end, scan);
      if (afterCompressed < 0) return afterCompressed;
      const compressed = scan.value;
      const afterLength = readCount(buf, afterCompressed, end, scan);
      if (afterLength < 0) return afterLength;
      return reach(afterLength + compressed, end, scan);
    }
    default:
      return bad(scan, `unknown RDB string encoding ${scan.value}`);
  }
}

/** Answers `position` if the buffer reaches it, else NEED. */
export function reach(position: number, end: number, scan: Scan): number {
  return position <= end ? position : needs(scan, position);
}

/** Skips a double saved as text (RDB_TYPE_ZSET): a length byte, or 253/254/255 for NaN/+inf/-inf. */
export function skipTextDouble(buf: Buffer, pos: number, end: number, scan: Scan): number {
  if (pos >= end) return needs(scan, pos + 1);
  const len = buf[pos];
  return reach(len >= 253 ? pos + 1 : pos + 1 + len, end, scan);
}

/**
 * The string encoded in buf[start, end) (as skipString found it), as a new Buffer that shares no
 * memory with `buf`; null when it cannot be decoded (corrupt LZF).
 */
export function decodeString(buf: Buffer, start: number, end: number, scan: Scan): Buffer | null {
  const body = readLength(buf, start, end, scan);
  if (!scan.special) return copyOut(buf, body, end);
  switch (scan.value) {
    case ENC_INT8:
      return Buffer.from(String(buf.readInt8(body)));
    case ENC_INT16:
      return Buffer.from(String(buf.readInt16LE(body)));
    case ENC_INT32:
      return Buffer.from(String(buf.readInt32LE(body)));
    default: {
      const afterCompressed = readLength(buf, body, end, scan);
      const afterLength = readLength(buf, afterCompressed, end, scan);
      return lzfDecompress(buf, afterLength, end, scan.value);
    }
  }
}

/** buf[start, end) as a new Buffer; small ones copied in a loop, which beats Buffer's copy there. */
export function copyOut(buf: Buffer, start: number, end: number): Buffer {
  const out = Buffer.allocUnsafe(end - start);
  copyInto(buf, start, end, out, 0);
  return out;
}

/** Copies buf[start, end) to target at `at`. */
export function copyInto(buf: Buffer, start: number, end: number, target: Buffer, at: number): void {
  if (end - start > 64) {
    buf.copy(target, at, start, end);
    return;
  }
  for (let i = start; i < end; i++) target[at++] = buf[i];
}

/** A module type's id (RDB_TYPE_MODULE_2, MODULE_AUX): a length that may use all 64 bits. */
export function readModuleId(buf: Buffer, pos: number, end: number, scan: Scan): { next: number; id: bigint } {
  if (pos < end && buf[pos] === LEN_64BIT) {
    const next = reach(pos + 9, end, scan);
    return { next, id: next < 0 ? 0n : buf.readBigUInt64BE(pos + 1) };
  }
  const next = readCount(buf, pos, end, scan);
  return { next, id: next < 0 ? 0n : BigInt(scan.value) };
}

const MODULE_NAME_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** A module type id as Redis names it (src/module.c moduleTypeNameByID): 9 characters, then a 10-bit encoding version. */
export function moduleTypeName(id: bigint): { name: string; encver: number } {
  let rest = id >> 10n;
  let name = '';
  for (let i = 0; i < 9; i++) {
    name = MODULE_NAME_CHARS[Number(rest & 63n)] + name;
    rest >>= 6n;
  }
  return { name, encver: Number(id & 1023n) };
}
