// LZF decompression (redis/redis src/lzf_d.c), for the few RDB strings the snapshot reader must
// read rather than carry: keys, AUX fields and function libraries longer than 20 bytes that Redis
// saved compressed. Values are never decompressed: their compressed bytes go into the DUMP payload
// as they are.
//
// The format is a sequence of runs, each opened by a control byte:
//   000LLLLL            a literal run of L + 1 bytes that follow;
//   LLLooooo [L] oooooooo  a back reference: copy len + 2 bytes from `offset + 1` bytes back,
//                       where len is LLL (3 bits), or 7 + the next byte when LLL is 7.

/** Decompresses input[start, end) into exactly `outLength` bytes; null when the input is corrupt. */
export function lzfDecompress(input: Uint8Array, start: number, end: number, outLength: number): Buffer | null {
  const out = Buffer.allocUnsafe(outLength);
  let ip = start;
  let op = 0;
  while (ip < end) {
    const ctrl = input[ip++];
    if (ctrl < 32) {
      const run = ctrl + 1;
      if (op + run > outLength || ip + run > end) return null;
      for (let i = 0; i < run; i++) out[op++] = input[ip++];
      continue;
    }
    let len = ctrl >>> 5;
    if (ip >= end) return null;
    if (len === 7) {
      len += input[ip++];
      if (ip >= end) return null;
    }
    let ref = op - ((ctrl & 0x1f) << 8) - 1 - input[ip++];
    len += 2;
    if (op + len > outLength || ref < 0) return null;
    // Byte by byte: a reference may overlap the bytes it produces (a run of one repeated byte).
    for (let i = 0; i < len; i++) out[op++] = out[ref++];
  }
  return op === outLength ? out : null;
}
