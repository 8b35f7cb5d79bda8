/**
 * MD5 of a byte range, computed in JS: the ring hashes every key with it (twice per write during a
 * migration: the write's placement and the change feed's), and for short keys node:crypto's
 * createHash costs several times more in object set-up than the digest itself. The 64 steps are
 * written out and nothing is allocated per call: a 16-byte key hashes in a third of the time of a
 * loop over the steps with a fresh tail block (bench/NOTES.md, "Double-write, write by write").
 * Word 0 of the digest (little-endian) is twemproxy's `md5` key hash.
 */

/** The message block being mixed, as 16 little-endian words. */
const X = new Int32Array(16);
/** The chaining state a..d. */
const H = new Int32Array(4);
/** The last one or two blocks: the message's tail, the 0x80 marker, the length in bits. */
const TAIL = new Uint8Array(128);

/**
 * Mixes the block in X into H: RFC 1321's 64 steps (section 3.4; the constants are its table T),
 * written out, because V8 does not inline 64 calls of a helper into one function and the calls
 * cost more than the arithmetic. Step i: n = a + F(b, c, d) + X[k] + T[i], then a = b + (n <<< s).
 */
function mix(): void {
  const x = X;
  let a = H[0];
  let b = H[1];
  let c = H[2];
  let d = H[3];
  let n = 0;
  n = (a + ((b & c) | (~b & d)) + x[0] + -680876936) | 0;
  a = (((n << 7) | (n >>> 25)) + b) | 0;
  n = (d + ((a & b) | (~a & c)) + x[1] + -389564586) | 0;
  d = (((n << 12) | (n >>> 20)) + a) | 0;
  n = (c + ((d & a) | (~d & b)) + x[2] + 606105819) | 0;
  c = (((n << 17) | (n >>> 15)) + d) | 0;
  n = (b + ((c & d) | (~c & a)) + x[3] + -1044525330) | 0;
  b = (((n << 22) | (n >>> 10)) + c) | 0;
  n = (a + ((b & c) | (~b & d)) + x[4] + -176418897) | 0;
  a = (((n << 7) | (n >>> 25)) + b) | 0;
  n = (d + ((a & b) | (~a & c)) + x[5] + 1200080426) | 0;
  d = (((n << 12) | (n >>> 20)) + a) | 0;
  n = (c + ((d & a) | (~d & b)) + x[6] + -1473231341) | 0;
  c = (((n << 17) | (n >>> 15)) + d) | 0;
  n = (b + ((c & d) | (~c & a)) + x[7] + -45705983) | 0;
  b = (((n << 22) | (n >>> 10)) + c) | 0;
  n = (a + ((b & c) | (~b & d)) + x[8] + 1770035416) | 0;
  a = (((n << 7) | (n >>> 25)) + b) | 0;
  n = (d + ((a & b) | (~a & c)) + x[9] + -1958414417) | 0;
  d = (((n << 12) | (n >>> 20)) + a) | 0;
  n = (c + ((d & a) | (~d & b)) + x[10] + -42063) | 0;
  c = (((n << 17) | (n >>> 15)) + d) | 0;
  n = (b + ((c & d) | (~c & a)) + x[11] + -1990404162) | 0;
  b = (((n << 22) | (n >>> 10)) + c) | 0;
  n = (a + ((b & c) | (~b & d)) + x[12] + 1804603682) | 0;
  a = (((n << 7) | (n >>> 25)) + b) | 0;
  n = (d + ((a & b) | (~a & c)) + x[13] + -40341101) | 0;
  d = (((n << 12) | (n >>> 20)) + a) | 0;
  n = (c + ((d & a) | (~d & b)) + x[14] + -1502002290) | 0;
  c = (((n << 17) | (n >>> 15)) + d) | 0;
  n = (b + ((c & d) | (~c & a)) + x[15] + 1236535329) | 0;
  b = (((n << 22) | (n >>> 10)) + c) | 0;
  n = (a + ((b & d) | (c & ~d)) + x[1] + -165796510) | 0;
  a = (((n << 5) | (n >>> 27)) + b) | 0;
  n = (d + ((a & c) | (b & ~c)) + x[6] + -1069501632) | 0;
  d = (((n << 9) | (n >>> 23)) + a) | 0;
  n = (c + ((d & b) | (a & ~b)) + x[11] + 643717713) | 0;
  c = (((n << 14) | (n >>> 18)) + d) | 0;
  n = (b + ((c & a) | (d & ~a)) + x[0] + -373897302) | 0;
  b = (((n << 20) | (n >>> 12)) + c) | 0;
  n = (a + ((b & d) | (c & ~d)) + x[5] + -701558691) | 0;
  a = (((n << 5) | (n >>> 27)) + b) | 0;
  n = (d + ((a & c) | (b & ~c)) + x[10] + 38016083) | 0;
  d = (((n << 9) | (n >>> 23)) + a) | 0;
  n = (c + ((d & b) | (a & ~b)) + x[15] + -660478335) | 0;
  c = (((n << 14) | (n >>> 18)) + d) | 0;
  n = (b + ((c & a) | (d & ~a)) + x[4] + -405537848) | 0;
  b = (((n << 20) | (n >>> 12)) + c) | 0;
  n = (a + ((b & d) | (c & ~d)) + x[9] + 568446438) | 0;
  a = (((n << 5) | (n >>> 27)) + b) | 0;
  n = (d + ((a & c) | (b & ~c)) + x[14] + -1019803690) | 0;
  d = (((n << 9) | (n >>> 23)) + a) | 0;
  n = (c + ((d & b) | (a & ~b)) + x[3] + -187363961) | 0;
  c = (((n << 14) | (n >>> 18)) + d) | 0;
  n = (b + ((c & a) | (d & ~a)) + x[8] + 1163531501) | 0;
  b = (((n << 20) | (n >>> 12)) + c) | 0;
  n = (a + ((b & d) | (c & ~d)) + x[13] + -1444681467) | 0;
  a = (((n << 5) | (n >>> 27)) + b) | 0;
  n = (d + ((a & c) | (b & ~c)) + x[2] + -51403784) | 0;
  d = (((n << 9) | (n >>> 23)) + a) | 0;
  n = (c + ((d & b) | (a & ~b)) + x[7] + 1735328473) | 0;
  c = (((n << 14) | (n >>> 18)) + d) | 0;
  n = (b + ((c & a) | (d & ~a)) + x[12] + -1926607734) | 0;
  b = (((n << 20) | (n >>> 12)) + c) | 0;
  n = (a + (b ^ c ^ d) + x[5] + -378558) | 0;
  a = (((n << 4) | (n >>> 28)) + b) | 0;
  n = (d + (a ^ b ^ c) + x[8] + -2022574463) | 0;
  d = (((n << 11) | (n >>> 21)) + a) | 0;
  n = (c + (d ^ a ^ b) + x[11] + 1839030562) | 0;
  c = (((n << 16) | (n >>> 16)) + d) | 0;
  n = (b + (c ^ d ^ a) + x[14] + -35309556) | 0;
  b = (((n << 23) | (n >>> 9)) + c) | 0;
  n = (a + (b ^ c ^ d) + x[1] + -1530992060) | 0;
  a = (((n << 4) | (n >>> 28)) + b) | 0;
  n = (d + (a ^ b ^ c) + x[4] + 1272893353) | 0;
  d = (((n << 11) | (n >>> 21)) + a) | 0;
  n = (c + (d ^ a ^ b) + x[7] + -155497632) | 0;
  c = (((n << 16) | (n >>> 16)) + d) | 0;
  n = (b + (c ^ d ^ a) + x[10] + -1094730640) | 0;
  b = (((n << 23) | (n >>> 9)) + c) | 0;
  n = (a + (b ^ c ^ d) + x[13] + 681279174) | 0;
  a = (((n << 4) | (n >>> 28)) + b) | 0;
  n = (d + (a ^ b ^ c) + x[0] + -358537222) | 0;
  d = (((n << 11) | (n >>> 21)) + a) | 0;
  n = (c + (d ^ a ^ b) + x[3] + -722521979) | 0;
  c = (((n << 16) | (n >>> 16)) + d) | 0;
  n = (b + (c ^ d ^ a) + x[6] + 76029189) | 0;
  b = (((n << 23) | (n >>> 9)) + c) | 0;
  n = (a + (b ^ c ^ d) + x[9] + -640364487) | 0;
  a = (((n << 4) | (n >>> 28)) + b) | 0;
  n = (d + (a ^ b ^ c) + x[12] + -421815835) | 0;
  d = (((n << 11) | (n >>> 21)) + a) | 0;
  n = (c + (d ^ a ^ b) + x[15] + 530742520) | 0;
  c = (((n << 16) | (n >>> 16)) + d) | 0;
  n = (b + (c ^ d ^ a) + x[2] + -995338651) | 0;
  b = (((n << 23) | (n >>> 9)) + c) | 0;
  n = (a + (c ^ (b | ~d)) + x[0] + -198630844) | 0;
  a = (((n << 6) | (n >>> 26)) + b) | 0;
  n = (d + (b ^ (a | ~c)) + x[7] + 1126891415) | 0;
  d = (((n << 10) | (n >>> 22)) + a) | 0;
  n = (c + (a ^ (d | ~b)) + x[14] + -1416354905) | 0;
  c = (((n << 15) | (n >>> 17)) + d) | 0;
  n = (b + (d ^ (c | ~a)) + x[5] + -57434055) | 0;
  b = (((n << 21) | (n >>> 11)) + c) | 0;
  n = (a + (c ^ (b | ~d)) + x[12] + 1700485571) | 0;
  a = (((n << 6) | (n >>> 26)) + b) | 0;
  n = (d + (b ^ (a | ~c)) + x[3] + -1894986606) | 0;
  d = (((n << 10) | (n >>> 22)) + a) | 0;
  n = (c + (a ^ (d | ~b)) + x[10] + -1051523) | 0;
  c = (((n << 15) | (n >>> 17)) + d) | 0;
  n = (b + (d ^ (c | ~a)) + x[1] + -2054922799) | 0;
  b = (((n << 21) | (n >>> 11)) + c) | 0;
  n = (a + (c ^ (b | ~d)) + x[8] + 1873313359) | 0;
  a = (((n << 6) | (n >>> 26)) + b) | 0;
  n = (d + (b ^ (a | ~c)) + x[15] + -30611744) | 0;
  d = (((n << 10) | (n >>> 22)) + a) | 0;
  n = (c + (a ^ (d | ~b)) + x[6] + -1560198380) | 0;
  c = (((n << 15) | (n >>> 17)) + d) | 0;
  n = (b + (d ^ (c | ~a)) + x[13] + 1309151649) | 0;
  b = (((n << 21) | (n >>> 11)) + c) | 0;
  n = (a + (c ^ (b | ~d)) + x[4] + -145523070) | 0;
  a = (((n << 6) | (n >>> 26)) + b) | 0;
  n = (d + (b ^ (a | ~c)) + x[11] + -1120210379) | 0;
  d = (((n << 10) | (n >>> 22)) + a) | 0;
  n = (c + (a ^ (d | ~b)) + x[2] + 718787259) | 0;
  c = (((n << 15) | (n >>> 17)) + d) | 0;
  n = (b + (d ^ (c | ~a)) + x[9] + -343485551) | 0;
  b = (((n << 21) | (n >>> 11)) + c) | 0;
  H[0] = (H[0] + a) | 0;
  H[1] = (H[1] + b) | 0;
  H[2] = (H[2] + c) | 0;
  H[3] = (H[3] + d) | 0;
}

function load(bytes: Uint8Array, at: number): void {
  for (let i = 0; i < 16; i++) {
    const q = at + i * 4;
    X[i] = bytes[q] | (bytes[q + 1] << 8) | (bytes[q + 2] << 16) | (bytes[q + 3] << 24);
  }
}

/** Hashes data[start, end) into H. Not re-entrant (shared buffers). */
function digest(data: Uint8Array, start: number, end: number): void {
  H[0] = 0x67452301;
  H[1] = 0xefcdab89 | 0;
  H[2] = 0x98badcfe | 0;
  H[3] = 0x10325476;
  const len = end - start;
  let p = start;
  for (; end - p >= 64; p += 64) {
    load(data, p);
    mix();
  }
  const rest = end - p;
  const blocks = rest < 56 ? 64 : 128;
  TAIL.fill(0, 0, blocks);
  for (let i = 0; i < rest; i++) TAIL[i] = data[p + i];
  TAIL[rest] = 0x80;
  const bits = len * 8;
  const at = blocks - 8;
  TAIL[at] = bits & 0xff;
  TAIL[at + 1] = (bits >>> 8) & 0xff;
  TAIL[at + 2] = (bits >>> 16) & 0xff;
  TAIL[at + 3] = (bits >>> 24) & 0xff;
  const high = Math.floor(len / 2 ** 29);
  TAIL[at + 4] = high & 0xff;
  TAIL[at + 5] = (high >>> 8) & 0xff;
  for (let q = 0; q < blocks; q += 64) {
    load(TAIL, q);
    mix();
  }
}

/** MD5 of data[start, end) as four unsigned little-endian words. */
export function md5Words(data: Uint8Array, start: number, end: number): [number, number, number, number] {
  digest(data, start, end);
  return [H[0] >>> 0, H[1] >>> 0, H[2] >>> 0, H[3] >>> 0];
}

/** The first little-endian word of data[start, end)'s MD5 (twemproxy's `md5` key hash), with nothing allocated. */
export function md5FirstWord(data: Uint8Array, start: number, end: number): number {
  digest(data, start, end);
  return H[0] >>> 0;
}
