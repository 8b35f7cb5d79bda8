/**
 * MD5 of a byte range, computed in JS: the ring hashes every key with it, and for short keys
 * node:crypto's createHash costs several times more in object set-up than the digest itself.
 * Returns the four little-endian 32-bit words of the digest (word 0 is twemproxy's `md5` key hash).
 */
const S = [7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21];
const K = Int32Array.from({ length: 64 }, (_, i) => Math.floor(Math.abs(Math.sin(i + 1)) * 2 ** 32) | 0);

const block = new Int32Array(16);
const out = new Int32Array(4);

function round(state: Int32Array): void {
  let a = state[0];
  let b = state[1];
  let c = state[2];
  let d = state[3];
  for (let i = 0; i < 64; i++) {
    let f: number;
    let g: number;
    if (i < 16) {
      f = (b & c) | (~b & d);
      g = i;
    } else if (i < 32) {
      f = (d & b) | (~d & c);
      g = (5 * i + 1) & 15;
    } else if (i < 48) {
      f = b ^ c ^ d;
      g = (3 * i + 5) & 15;
    } else {
      f = c ^ (b | ~d);
      g = (7 * i) & 15;
    }
    const t = d;
    d = c;
    c = b;
    const x = (a + f + K[i] + block[g]) | 0;
    b = (b + ((x << S[i]) | (x >>> (32 - S[i])))) | 0;
    a = t;
  }
  state[0] = (state[0] + a) | 0;
  state[1] = (state[1] + b) | 0;
  state[2] = (state[2] + c) | 0;
  state[3] = (state[3] + d) | 0;
}

/** MD5 of data[start, end) as four unsigned little-endian words. Not re-entrant (shared buffers). */
export function md5Words(data: Uint8Array, start: number, end: number): [number, number, number, number] {
  out[0] = 0x67452301;
  out[1] = 0xefcdab89 | 0;
  out[2] = 0x98badcfe | 0;
  out[3] = 0x10325476;
  const len = end - start;
  let p = start;
  for (; end - p >= 64; p += 64) {
    for (let i = 0; i < 16; i++) {
      const q = p + i * 4;
      block[i] = data[q] | (data[q + 1] << 8) | (data[q + 2] << 16) | (data[q + 3] << 24);
    }
    round(out);
  }
  // The tail, the 0x80 marker and the bit length, in one or two final blocks.
  const rest = end - p;
  const tail = new Uint8Array(rest < 56 ? 64 : 128);
  tail.set(data.subarray(p, end));
  tail[rest] = 0x80;
  const bits = len * 8;
  const at = tail.length - 8;
  tail[at] = bits & 0xff;
  tail[at + 1] = (bits >>> 8) & 0xff;
  tail[at + 2] = (bits >>> 16) & 0xff;
  tail[at + 3] = (bits >>> 24) & 0xff;
  const high = Math.floor(len / 2 ** 29);
  tail[at + 4] = high & 0xff;
  tail[at + 5] = (high >>> 8) & 0xff;
  for (let q = 0; q < tail.length; q += 64) {
    for (let i = 0; i < 16; i++) {
      const r = q + i * 4;
      block[i] = tail[r] | (tail[r + 1] << 8) | (tail[r + 2] << 16) | (tail[r + 3] << 24);
    }
    round(out);
  }
  return [out[0] >>> 0, out[1] >>> 0, out[2] >>> 0, out[3] >>> 0];
}
