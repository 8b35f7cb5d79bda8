/**
 * The proxy's own replies and the requests it makes itself, in RESP2.
 * Forwarded traffic never passes through here (see reply-framer.ts and request-decoder.ts).
 */

const CRLF = '\r\n';

export const OK = Buffer.from('+OK\r\n');
export const PONG = Buffer.from('+PONG\r\n');
export const NULL_BULK = Buffer.from('$-1\r\n');
export const NULL_ARRAY = Buffer.from('*-1\r\n');
export const EMPTY_ARRAY = Buffer.from('*0\r\n');
/** RESP3's null, where RESP2 has `$-1` and `*-1`. */
export const RESP3_NULL = Buffer.from('_\r\n');

export function simple(s: string): Buffer {
  return Buffer.from(`+${s}${CRLF}`);
}

/** An error reply; `message` starts with its Redis code (ERR, CROSSSLOT, NOPROTO ...). */
export function error(message: string): Buffer {
  return Buffer.from(`-${message.replace(/[\r\n]+/g, ' ')}${CRLF}`);
}

/**
 * An error reply whose text is latin1, one char a byte: it quotes a client's bytes (an unknown
 * command, a protocol error's `got '%c'`). As Redis's rejectCommandFormat, each CR or LF is a space.
 */
export function errorBytes(message: string): Buffer {
  return Buffer.from(`-${message.replace(/[\r\n]/g, ' ')}${CRLF}`, 'latin1');
}

export function integer(n: number | bigint): Buffer {
  return Buffer.from(`:${n}${CRLF}`);
}

export function bulk(value: Buffer | string | null): Buffer {
  if (value === null) return NULL_BULK;
  const body = typeof value === 'string' ? Buffer.from(value) : value;
  return Buffer.concat([Buffer.from(`$${body.length}${CRLF}`), body, Buffer.from(CRLF)]);
}

/** An array whose elements are already-encoded replies (or raw frames from a back end). */
export function arrayOfFrames(frames: readonly Buffer[]): Buffer {
  return Buffer.concat([Buffer.from(`*${frames.length}${CRLF}`), ...frames]);
}

/** A RESP3 map; `frames` holds keys and values alternately, already encoded. */
export function mapOfFrames(frames: readonly Buffer[]): Buffer {
  return Buffer.concat([Buffer.from(`%${frames.length / 2}${CRLF}`), ...frames]);
}

/** A RESP3 push frame (Pub/Sub messages and confirmations for RESP3 clients). */
export function pushOfFrames(frames: readonly Buffer[]): Buffer {
  return Buffer.concat([Buffer.from(`>${frames.length}${CRLF}`), ...frames]);
}

/** A RESP3 set of bulk strings (CLIENT TRACKINGINFO's flags). */
export function setOfBulks(values: readonly (Buffer | string)[]): Buffer {
  return Buffer.concat([Buffer.from(`~${values.length}${CRLF}`), ...values.map(bulk)]);
}

export function arrayOfBulks(values: readonly (Buffer | string)[]): Buffer {
  return arrayOfFrames(values.map(bulk));
}

/**
 * A request as RESP: `*<n>` then one bulk per argument, written into one buffer sized up front
 * (the parts of a split request and every fan-out go through here: no buffer per header).
 */
export function command(args: readonly (Buffer | string)[]): Buffer {
  const n = args.length;
  let size = 1 + digits(n) + 2;
  let bytes: (Buffer | string)[] | null = null; // only when some argument is a string
  for (let i = 0; i < n; i++) {
    let a = args[i];
    if (typeof a === 'string') {
      bytes ??= args.slice();
      a = bytes[i] = Buffer.from(a);
    }
    size += 1 + digits(a.length) + 2 + a.length + 2;
  }
  const from = bytes ?? args;
  const out = Buffer.allocUnsafe(size);
  let at = writeHeader(out, 0, 42, n); // '*'
  for (let i = 0; i < n; i++) at = writeBulk(out, at, from[i] as Buffer);
  return out;
}

/**
 * encode.command of `first` then, for each of `keyIndexes`, the `stride` arguments starting at
 * args[positions[k]]: a split part's request, written from the client's arguments without an
 * argument list of its own.
 */
export function commandOfKeys(first: Buffer, args: readonly Buffer[], positions: readonly number[], stride: number, keyIndexes: readonly number[]): Buffer {
  const n = 1 + keyIndexes.length * stride;
  let size = 1 + digits(n) + 2 + 1 + digits(first.length) + 2 + first.length + 2;
  for (let k = 0; k < keyIndexes.length; k++) {
    const pos = positions[keyIndexes[k]];
    for (let j = 0; j < stride; j++) {
      const len = args[pos + j].length;
      size += 1 + digits(len) + 2 + len + 2;
    }
  }
  const out = Buffer.allocUnsafe(size);
  let at = writeHeader(out, 0, 42, n); // '*'
  at = writeBulk(out, at, first);
  for (let k = 0; k < keyIndexes.length; k++) {
    const pos = positions[keyIndexes[k]];
    for (let j = 0; j < stride; j++) at = writeBulk(out, at, args[pos + j]);
  }
  return out;
}

/** Writes `$<len>\r\n<bytes>\r\n` at `at`; returns where the next byte goes. */
function writeBulk(out: Buffer, at: number, b: Buffer): number {
  const len = b.length;
  at = writeHeader(out, at, 36, len); // '$'
  // A whole argument: TypedArray set is a memmove inside V8, cheaper than a byte loop even for short keys.
  out.set(b, at);
  at += len;
  out[at] = 13;
  out[at + 1] = 10;
  return at + 2;
}

/** Below this many bytes a JS loop copies faster than a native copy call (keys, small values). */
const LOOP_COPY_MAX = 64;

/** Copies src[start, end) into `out` at `at`; returns where the next byte goes. */
export function copyBytes(src: Buffer, start: number, end: number, out: Buffer, at: number): number {
  if (end - start > LOOP_COPY_MAX) return at + src.copy(out, at, start, end);
  for (let i = start; i < end; i++) out[at++] = src[i];
  return at;
}

function digits(n: number): number {
  if (n < 10) return 1;
  if (n < 100) return 2;
  let d = 2;
  while (n >= 100) {
    n = Math.floor(n / 10);
    d++;
  }
  return d;
}

/** Bytes of an array header `*<n>\r\n`. */
export function arrayHeaderLength(n: number): number {
  return 1 + digits(n) + 2;
}

/** Writes an array header `*<n>\r\n` at `at`; returns where the next byte goes. */
export function writeArrayHeader(out: Buffer, at: number, n: number): number {
  return writeHeader(out, at, 42, n);
}

/** Writes `<type><n>\r\n` at `at`; returns where the next byte goes. */
function writeHeader(out: Buffer, at: number, type: number, n: number): number {
  out[at] = type;
  if (n < 100) {
    // Most lengths and counts: no division loop.
    if (n >= 10) {
      const tens = (n / 10) | 0;
      out[++at] = 48 + tens;
      n -= 10 * tens;
    }
    out[at + 1] = 48 + n;
    out[at + 2] = 13;
    out[at + 3] = 10;
    return at + 4;
  }
  const end = at + 1 + digits(n);
  for (let i = end - 1; i > at; i--) {
    out[i] = 48 + (n % 10);
    n = Math.floor(n / 10);
  }
  out[end] = 13;
  out[end + 1] = 10;
  return end + 2;
}

/** Text a client reads as a document (CLIENT LIST, CLIENT INFO): a bulk string, or RESP3's verbatim `txt` string. */
export function verbatim(text: string, protocol: 2 | 3): Buffer {
  if (protocol === 2) return bulk(text);
  const body = Buffer.from(`txt:${text}`);
  return Buffer.concat([Buffer.from(`=${body.length}${CRLF}`), body, Buffer.from(CRLF)]);
}

/**
 * A double as Redis's addReplyDouble writes it: `%.17g`, a bulk string in RESP2 and `,` in RESP3.
 * For values from 1e-4 up to 1e17 (ages, scores of that size), where %g writes no exponent.
 */
export function double(value: number, protocol: 2 | 3): Buffer {
  let text = value === 0 ? '0' : value.toPrecision(17);
  if (text.includes('.') && !text.includes('e')) text = text.replace(/0+$/, '').replace(/\.$/, '');
  return protocol === 3 ? Buffer.from(`,${text}\r\n`) : bulk(text);
}
