/**
 * twemproxy's key hashes, computed bit for bit as nutcracker 0.5.0 computes them on x86-64, so a
 * ring built from the same servers puts every key where twemproxy puts it.
 *
 * Quirks kept on purpose (each changes where keys land):
 * - Several hashes read bytes as C `char`, which is signed on x86-64: a byte from 0x80 up enters
 *   as 0xffffff80.. (`signedByte`). This affects fnv1_64, fnv1a_64, fnv1_32, fnv1a_32,
 *   one_at_a_time and the 3-byte tail of hsieh.
 * - `fnv1a_64` is 32-bit FNV-1a with the 64-bit offset basis and prime truncated to 32 bits.
 * - `fnv1_64` is real 64-bit FNV-1 truncated to its low 32 bits at the end.
 * - `crc32` is libmemcached's: bits 16..30 of the CRC-32 only; `crc32a` is the whole CRC-32.
 * - `crc16` is CCITT (XMODEM table) without truncation to 16 bits: the register is 32 bits wide
 *   and keeps the bits shifted out, so it is not Redis Cluster's CRC16 except on short keys.
 * - `md5` is the first four bytes of the MD5 digest, little-endian.
 * All results are unsigned 32-bit numbers.
 */
import { md5FirstWord } from './md5';
import { CRC16_TABLE } from './slot';
import { HashName } from '../config/schema';

export type KeyHash = (key: Uint8Array, start: number, end: number) => number;

/** A byte read through a signed C `char` and converted to uint32. */
function signedByte(b: number): number {
  return b >= 0x80 ? (b | 0xffffff00) >>> 0 : b;
}

const CRC32_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

export const oneAtATime: KeyHash = (key, start, end) => {
  let v = 0;
  for (let i = start; i < end; i++) {
    v = (v + signedByte(key[i])) >>> 0;
    v = (v + (v << 10)) >>> 0;
    v = (v ^ (v >>> 6)) >>> 0;
  }
  v = (v + (v << 3)) >>> 0;
  v = (v ^ (v >>> 11)) >>> 0;
  v = (v + (v << 15)) >>> 0;
  return v;
};

export const md5: KeyHash = md5FirstWord;

export const crc16: KeyHash = (key, start, end) => {
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc = ((crc << 8) ^ CRC16_TABLE[((crc >>> 8) ^ key[i]) & 0xff]) >>> 0;
  }
  return crc;
};

function crc32Register(key: Uint8Array, start: number, end: number): number {
  let crc = 0xffffffff;
  for (let i = start; i < end; i++) crc = (crc >>> 8) ^ CRC32_TABLE[(crc ^ key[i]) & 0xff];
  return crc >>> 0;
}

export const crc32: KeyHash = (key, start, end) => ((~crc32Register(key, start, end) >>> 16) & 0x7fff) >>> 0;

export const crc32a: KeyHash = (key, start, end) => (~crc32Register(key, start, end)) >>> 0;

export const fnv1_64: KeyHash = (key, start, end) => {
  // twemproxy keeps all 64 bits and returns the low 32. Multiplication and XOR carry nothing from
  // the high half into the low one, so 32-bit arithmetic with the low halves of the offset basis
  // (0xcbf29ce4_84222325) and the prime (0x100000001b3) gives the same low 32 bits, without BigInt.
  let h = 0x84222325;
  for (let i = start; i < end; i++) h = (Math.imul(h, 0x1b3) ^ signedByte(key[i])) >>> 0;
  return h;
};

export const fnv1a_64: KeyHash = (key, start, end) => {
  let h = 0x84222325;
  for (let i = start; i < end; i++) {
    h = Math.imul((h ^ signedByte(key[i])) >>> 0, 0x1b3) >>> 0;
  }
  return h >>> 0;
};

export const fnv1_32: KeyHash = (key, start, end) => {
  let h = 2166136261;
  for (let i = start; i < end; i++) {
    h = (Math.imul(h, 16777619) ^ signedByte(key[i])) >>> 0;
  }
  return h >>> 0;
};

export const fnv1a_32: KeyHash = (key, start, end) => {
  let h = 2166136261;
  for (let i = start; i < end; i++) {
    h = Math.imul((h ^ signedByte(key[i])) >>> 0, 16777619) >>> 0;
  }
  return h >>> 0;
};

export const hsieh: KeyHash = (key, start, end) => {
  let len = end - start;
  if (len <= 0) return 0;
  const get16 = (i: number): number => key[i] | (key[i + 1] << 8);
  let hash = 0;
  let p = start;
  const rem = len & 3;
  len >>>= 2;
  for (; len > 0; len--) {
    hash = (hash + get16(p)) >>> 0;
    const tmp = ((get16(p + 2) << 11) ^ hash) >>> 0;
    hash = ((hash << 16) ^ tmp) >>> 0;
    p += 4;
    hash = (hash + (hash >>> 11)) >>> 0;
  }
  switch (rem) {
    case 3:
      hash = (hash + get16(p)) >>> 0;
      hash = (hash ^ (hash << 16)) >>> 0;
      hash = (hash ^ (signedByte(key[p + 2]) << 18)) >>> 0;
      hash = (hash + (hash >>> 11)) >>> 0;
      break;
    case 2:
      hash = (hash + get16(p)) >>> 0;
      hash = (hash ^ (hash << 11)) >>> 0;
      hash = (hash + (hash >>> 17)) >>> 0;
      break;
    case 1:
      hash = (hash + key[p]) >>> 0;
      hash = (hash ^ (hash << 10)) >>> 0;
      hash = (hash + (hash >>> 1)) >>> 0;
      break;
    default:
      break;
  }
  hash = (hash ^ (hash << 3)) >>> 0;
  hash = (hash + (hash >>> 5)) >>> 0;
  hash = (hash ^ (hash << 4)) >>> 0;
  hash = (hash + (hash >>> 17)) >>> 0;
  hash = (hash ^ (hash << 25)) >>> 0;
  hash = (hash + (hash >>> 6)) >>> 0;
  return hash;
};

const MURMUR_M = 0x5bd1e995;

export const murmur: KeyHash = (key, start, end) => {
  let length = end - start;
  const seed = Math.imul(0xdeadbeef, length) >>> 0;
  let h = (seed ^ length) >>> 0;
  let p = start;
  while (length >= 4) {
    let k = (key[p] | (key[p + 1] << 8) | (key[p + 2] << 16) | (key[p + 3] << 24)) >>> 0;
    k = Math.imul(k, MURMUR_M) >>> 0;
    k = (k ^ (k >>> 24)) >>> 0;
    k = Math.imul(k, MURMUR_M) >>> 0;
    h = Math.imul(h, MURMUR_M) >>> 0;
    h = (h ^ k) >>> 0;
    p += 4;
    length -= 4;
  }
  // The C switch falls through from 3 to 2 to 1.
  if (length >= 3) h = (h ^ (key[p + 2] << 16)) >>> 0;
  if (length >= 2) h = (h ^ (key[p + 1] << 8)) >>> 0;
  if (length >= 1) {
    h = (h ^ key[p]) >>> 0;
    h = Math.imul(h, MURMUR_M) >>> 0;
  }
  h = (h ^ (h >>> 13)) >>> 0;
  h = Math.imul(h, MURMUR_M) >>> 0;
  h = (h ^ (h >>> 15)) >>> 0;
  return h;
};

function rot(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** Bob Jenkins' lookup3 hashlittle with initval 13, byte-at-a-time path (same result on x86). */
export const jenkins: KeyHash = (key, start, end) => {
  let length = end - start;
  let a = (0xdeadbeef + length + 13) >>> 0;
  let b = a;
  let c = a;
  let p = start;
  const word = (i: number): number => (key[i] | (key[i + 1] << 8) | (key[i + 2] << 16) | (key[i + 3] << 24)) >>> 0;
  while (length > 12) {
    a = (a + word(p)) >>> 0;
    b = (b + word(p + 4)) >>> 0;
    c = (c + word(p + 8)) >>> 0;
    a = (a - c) >>> 0; a = (a ^ rot(c, 4)) >>> 0; c = (c + b) >>> 0;
    b = (b - a) >>> 0; b = (b ^ rot(a, 6)) >>> 0; a = (a + c) >>> 0;
    c = (c - b) >>> 0; c = (c ^ rot(b, 8)) >>> 0; b = (b + a) >>> 0;
    a = (a - c) >>> 0; a = (a ^ rot(c, 16)) >>> 0; c = (c + b) >>> 0;
    b = (b - a) >>> 0; b = (b ^ rot(a, 19)) >>> 0; a = (a + c) >>> 0;
    c = (c - b) >>> 0; c = (c ^ rot(b, 4)) >>> 0; b = (b + a) >>> 0;
    length -= 12;
    p += 12;
  }
  if (length === 0) return c;
  // The last block, zero-padded: bytes 0-3 into a, 4-7 into b, 8-11 into c, little-endian.
  const tail = [0, 0, 0];
  for (let i = 0; i < length; i++) tail[i >> 2] = (tail[i >> 2] + (key[p + i] << ((i & 3) * 8))) >>> 0;
  a = (a + tail[0]) >>> 0;
  b = (b + tail[1]) >>> 0;
  c = (c + tail[2]) >>> 0;
  c = (c ^ b) >>> 0; c = (c - rot(b, 14)) >>> 0;
  a = (a ^ c) >>> 0; a = (a - rot(c, 11)) >>> 0;
  b = (b ^ a) >>> 0; b = (b - rot(a, 25)) >>> 0;
  c = (c ^ b) >>> 0; c = (c - rot(b, 16)) >>> 0;
  a = (a ^ c) >>> 0; a = (a - rot(c, 4)) >>> 0;
  b = (b ^ a) >>> 0; b = (b - rot(a, 14)) >>> 0;
  c = (c ^ b) >>> 0; c = (c - rot(b, 24)) >>> 0;
  return c;
};

/** Every twemproxy hash by its config name. */
export const KEY_HASHES: Readonly<Record<HashName, KeyHash>> = Object.freeze({
  one_at_a_time: oneAtATime,
  md5,
  crc16,
  crc32,
  crc32a,
  fnv1_64,
  fnv1a_64,
  fnv1_32,
  fnv1a_32,
  hsieh,
  murmur,
  jenkins,
});
