/**
 * Redis Cluster's hash slot: CRC16 (XMODEM) of the key's hashed bytes (hash-tag.ts), mod 16384.
 *
 * Written here rather than taken from cluster-key-slot: that package hashes `foo{}{bar}` as if its
 * tag were `{bar` (it keeps looking for a tag after an empty `{}`), while Redis hashes the whole
 * key. The package stays as a cross-check in the unit tests for keys without that pattern.
 */
import { BRACES, hashTagged } from './hash-tag';

/** CRC16-CCITT (XMODEM, polynomial 0x1021) lookup table; twemproxy's `crc16` key hash uses it too. */
export const CRC16_TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let b = 0; b < 8; b++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    t[i] = crc;
  }
  return t;
})();

export const SLOT_COUNT = 16384;

/** CRC16-XMODEM of buf[start, end). */
export function crc16(buf: Uint8Array, start = 0, end = buf.length): number {
  let crc = 0;
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ buf[i]) & 0xff];
  return crc;
}

/** The hash slot of `key`. */
export function keySlot(key: Buffer): number {
  return hashTagged(key, BRACES, crc16) & (SLOT_COUNT - 1);
}
