// Redis's CRC64 (proxy/replication/crc64.ts), checked with the values of Redis's own test
// (src/crc64.c crc64Test) and against a bit-by-bit reference, fed whole and in pieces.
import { Crc64, crc64 } from '../../proxy/replication/crc64';
import { randInt, xorshift32 } from '../helpers/random';

const LOREM =
  'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna ' +
  'aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. ' +
  'Duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur. Excepteur ' +
  'sint occaecat cupidatat non proident, sunt in culpa qui officia deserunt mollit anim id est laborum.';

/** The reflected Jones CRC64 one bit at a time, in BigInt: slow and obviously right. */
function reference(bytes: Uint8Array): bigint {
  const poly = 0x95ac9329ac4bc9b5n;
  let crc = 0n;
  for (const byte of bytes) {
    crc ^= BigInt(byte);
    for (let bit = 0; bit < 8; bit++) crc = (crc & 1n) === 1n ? (crc >> 1n) ^ poly : crc >> 1n;
  }
  return crc;
}

describe('CRC64 (Jones, reflected)', () => {
  test('Redis check values: "123456789" and the lorem ipsum with its trailing NUL', () => {
    expect(crc64(Buffer.from('123456789'))).toBe(0xe9c6d914c4b8d9can);
    expect(crc64(Buffer.from(`${LOREM}\0`))).toBe(0xc7794709e69683b3n);
    expect(crc64(Buffer.alloc(0))).toBe(0n);
  });

  test('equal to the bit-by-bit reference for every length 0 to 64 (the 8-byte words and the tail)', () => {
    const rng = xorshift32(7);
    const bytes = Buffer.from(Array.from({ length: 64 }, () => randInt(rng, 0, 255)));
    for (let n = 0; n <= 64; n++) expect(crc64(bytes, 0, n)).toBe(reference(bytes.subarray(0, n)));
  });

  test('fed in pieces of any size, and over a range of a buffer, it gives the same value', () => {
    const rng = xorshift32(11);
    const bytes = Buffer.from(Array.from({ length: 5000 }, () => randInt(rng, 0, 255)));
    const running = new Crc64();
    for (let at = 0; at < bytes.length; ) {
      const next = Math.min(bytes.length, at + randInt(rng, 1, 40));
      running.update(bytes, at, next);
      at = next;
    }
    expect(running.value()).toBe(reference(bytes));
    expect(crc64(bytes, 100, 4000)).toBe(reference(bytes.subarray(100, 4000)));
  });

  test('written little-endian, as a DUMP payload ends: DUMP of "bar" on Redis 7.0.15', () => {
    const dump = Buffer.from('00036261720a00e6be4960ee66fd17', 'hex'); // type 0, "bar", version 10, CRC64
    const out = Buffer.alloc(8);
    new Crc64().update(dump, 0, dump.length - 8).writeLE(out, 0);
    expect(out).toEqual(dump.subarray(dump.length - 8));
  });
});
