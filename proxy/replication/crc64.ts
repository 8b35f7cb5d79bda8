// Redis's CRC64 (redis/redis src/crc64.c): the Jones polynomial 0xad93d23594c935a9, reflected,
// initial value 0, no final xor. It closes every RDB file (the 8 bytes after the EOF opcode) and
// every DUMP payload (the 8 bytes after the 2-byte RDB version), little-endian in both.
//
// JavaScript has no fast 64-bit integer, so the register is kept as two uint32 halves and the
// tables as pairs of Uint32Arrays; whole 8-byte words go through slicing-by-8 (8 table look-ups
// per word instead of 8 dependent ones per byte).

/** The reflected form of the Jones polynomial, as two halves. */
const POLY_HI = 0x95ac9329;
const POLY_LO = 0xac4bc9b5;

const SLICES = 8;
/** TABLE_LO[k * 256 + b], TABLE_HI[k * 256 + b]: CRC of byte b followed by k zero bytes. */
const TABLE_LO = new Uint32Array(SLICES * 256);
const TABLE_HI = new Uint32Array(SLICES * 256);

function buildTables(): void {
  for (let b = 0; b < 256; b++) {
    let lo = b;
    let hi = 0;
    for (let bit = 0; bit < 8; bit++) {
      const carry = lo & 1;
      lo = ((lo >>> 1) | (hi << 31)) >>> 0;
      hi >>>= 1;
      if (carry !== 0) {
        lo = (lo ^ POLY_LO) >>> 0;
        hi = (hi ^ POLY_HI) >>> 0;
      }
    }
    TABLE_LO[b] = lo;
    TABLE_HI[b] = hi;
  }
  for (let k = 1; k < SLICES; k++) {
    for (let b = 0; b < 256; b++) {
      const prevLo = TABLE_LO[(k - 1) * 256 + b];
      const prevHi = TABLE_HI[(k - 1) * 256 + b];
      const i = prevLo & 0xff;
      TABLE_LO[k * 256 + b] = (((prevLo >>> 8) | (prevHi << 24)) ^ TABLE_LO[i]) >>> 0;
      TABLE_HI[k * 256 + b] = ((prevHi >>> 8) ^ TABLE_HI[i]) >>> 0;
    }
  }
}
buildTables();

/** A running CRC64 over bytes fed in order. */
export class Crc64 {
  /** The register's high and low 32 bits. */
  hi = 0;
  lo = 0;

  /** Feeds bytes[start, end). */
  update(bytes: Uint8Array, start = 0, end = bytes.length): this {
    let hi = this.hi;
    let lo = this.lo;
    let i = start;
    const words = end - ((end - start) & 7);
    while (i < words) {
      lo ^= bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24);
      hi ^= bytes[i + 4] | (bytes[i + 5] << 8) | (bytes[i + 6] << 16) | (bytes[i + 7] << 24);
      const a = 7 * 256 + (lo & 0xff);
      const b = 6 * 256 + ((lo >>> 8) & 0xff);
      const c = 5 * 256 + ((lo >>> 16) & 0xff);
      const d = 4 * 256 + (lo >>> 24);
      const e = 3 * 256 + (hi & 0xff);
      const f = 2 * 256 + ((hi >>> 8) & 0xff);
      const g = 256 + ((hi >>> 16) & 0xff);
      const h = hi >>> 24;
      lo = TABLE_LO[a] ^ TABLE_LO[b] ^ TABLE_LO[c] ^ TABLE_LO[d] ^ TABLE_LO[e] ^ TABLE_LO[f] ^ TABLE_LO[g] ^ TABLE_LO[h];
      hi = TABLE_HI[a] ^ TABLE_HI[b] ^ TABLE_HI[c] ^ TABLE_HI[d] ^ TABLE_HI[e] ^ TABLE_HI[f] ^ TABLE_HI[g] ^ TABLE_HI[h];
      i += 8;
    }
    while (i < end) {
      const t = (lo ^ bytes[i]) & 0xff;
      lo = ((lo >>> 8) | (hi << 24)) ^ TABLE_LO[t];
      hi = (hi >>> 8) ^ TABLE_HI[t];
      i++;
    }
    this.hi = hi >>> 0;
    this.lo = lo >>> 0;
    return this;
  }

  /** The CRC of everything fed so far. */
  value(): bigint {
    return (BigInt(this.hi >>> 0) << 32n) | BigInt(this.lo >>> 0);
  }

  /** Writes the CRC as 8 bytes little-endian at `offset`, as RDB files and DUMP payloads carry it. */
  writeLE(target: Buffer, offset: number): void {
    const lo = this.lo;
    const hi = this.hi;
    target[offset] = lo;
    target[offset + 1] = lo >>> 8;
    target[offset + 2] = lo >>> 16;
    target[offset + 3] = lo >>> 24;
    target[offset + 4] = hi;
    target[offset + 5] = hi >>> 8;
    target[offset + 6] = hi >>> 16;
    target[offset + 7] = hi >>> 24;
  }
}

/** CRC64 of bytes[start, end). */
export function crc64(bytes: Uint8Array, start = 0, end = bytes.length): bigint {
  return new Crc64().update(bytes, start, end).value();
}
