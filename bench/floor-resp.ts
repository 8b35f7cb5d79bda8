// The RESP scanning both floors of the bench share (bench/mux-floor.ts): byte loops over frames,
// a shared read buffer, and Redis Cluster's key slot. Written apart from the product's code, so a
// floor runs none of it.
import net from 'node:net';

/** The decimal integer in `buf` from `from` to `to` (RESP lengths: digits, maybe a minus sign). */
export function parseLength(buf: Buffer, from: number, to: number): number {
  let n = 0;
  for (let i = buf[from] === 45 ? from + 1 : from; i < to; i++) n = n * 10 + buf[i] - 48;
  return buf[from] === 45 ? -n : n;
}

/** Where the CR ending the line at `at` is, or -1: a byte loop (RESP lines are short, a native call costs more). */
export function crAt(buf: Buffer, at: number): number {
  for (let i = at; i < buf.length; i++) if (buf[i] === 13) return i;
  return -1;
}

/** Copies src[start, end) to `out` at `at`, returning where the next byte goes: a byte loop below 64 bytes, as slotproxy copies. */
export function copyRange(src: Buffer, start: number, end: number, out: Buffer, at: number): number {
  if (end - start > 64) return at + src.copy(out, at, start, end);
  for (let i = start; i < end; i++) out[at++] = src[i];
  return at;
}

/** Length of the whole RESP frame at `at`, or -1 when `buf` does not hold all of it yet. */
export function frameLength(buf: Buffer, at: number): number {
  const eol = crAt(buf, at);
  if (eol < 0 || eol + 1 >= buf.length) return -1;
  const type = buf[at];
  // Arrays, bulks, and the RESP3 pushes and maps a change feed reads; anything else is a line.
  if (type !== 42 && type !== 36 && type !== 62 && type !== 37) return eol + 2 - at;
  const n = parseLength(buf, at + 1, eol) * (type === 37 ? 2 : 1);
  if (type === 36) return n < 0 ? eol + 2 - at : eol + 2 + n + 2 <= buf.length ? eol + 2 + n + 2 - at : -1;
  let end = eol + 2;
  for (let i = 0; i < n; i++) {
    const len = frameLength(buf, end);
    if (len < 0) return -1;
    end += len;
  }
  return end - at;
}

/** Cuts whole frames off a byte stream, keeping a partial one for the next chunk. */
export class Frames {
  private rest: Buffer | null = null;
  each(chunk: Buffer, onFrame: (frame: Buffer) => void): void {
    const buf = this.rest === null ? chunk : Buffer.concat([this.rest, chunk]);
    let at = 0;
    for (let len = frameLength(buf, at); len > 0; len = frameLength(buf, at)) {
      onFrame(buf.subarray(at, at + len));
      at += len;
    }
    this.rest = at < buf.length ? buf.subarray(at) : null;
  }
}

export const shared = Buffer.allocUnsafeSlow(64 * 1024);
export function copyOut(n: number): Buffer {
  const chunk = Buffer.allocUnsafe(n);
  shared.copy(chunk, 0, 0, n);
  return chunk;
}

/** Reads an accepted (paused) socket into `shared` through the fields Node's `onread` option sets. */
export function readInto(socket: net.Socket, onChunk: (chunk: Buffer) => void): void {
  const symbols = new Map(Object.getOwnPropertySymbols(socket).map((s) => [s.description, s]));
  const handle = (socket as unknown as { _handle: { useUserBuffer(b: Buffer): void } })._handle;
  const fields = socket as unknown as Record<symbol, unknown>;
  fields[symbols.get('kBuffer') as symbol] = shared;
  fields[symbols.get('kBufferCb') as symbol] = (n: number) => onChunk(copyOut(n));
  handle.useUserBuffer(shared);
  socket.resume();
}

/** Where each argument of a request `*N $len arg ...` lies: [start, end) pairs, flat. */
export function argBounds(frame: Buffer): number[] {
  const eol = crAt(frame, 0);
  const n = parseLength(frame, 1, eol);
  const out = new Array<number>(2 * n);
  let at = eol + 2;
  for (let i = 0; i < n; i++) {
    const end = crAt(frame, at);
    const len = parseLength(frame, at + 1, end);
    out[2 * i] = end + 2;
    out[2 * i + 1] = end + 2 + len;
    at = end + 2 + len + 2;
  }
  return out;
}

// CRC16 (XMODEM) of the key, or of its hash tag, modulo 16384: Redis Cluster's key slot.
const CRC_TABLE = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let crc = i << 8;
  for (let j = 0; j < 8; j++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  CRC_TABLE[i] = crc;
}
export function slotOf(buf: Buffer, start: number, end: number): number {
  let open = start;
  while (open < end && buf[open] !== 123 /* { */) open++;
  if (open < end) {
    let close = open + 1;
    while (close < end && buf[close] !== 125 /* } */) close++;
    if (close < end && close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ CRC_TABLE[((crc >> 8) ^ buf[i]) & 0xff];
  return crc & 16383;
}

