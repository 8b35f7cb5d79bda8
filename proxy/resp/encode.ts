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

export function arrayOfBulks(values: readonly (Buffer | string)[]): Buffer {
  return arrayOfFrames(values.map(bulk));
}

/** A request as RESP: `*<n>` then one bulk per argument. */
export function command(args: readonly (Buffer | string)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}${CRLF}`)];
  for (const a of args) {
    const b = typeof a === 'string' ? Buffer.from(a) : a;
    parts.push(Buffer.from(`$${b.length}${CRLF}`), b, Buffer.from(CRLF));
  }
  return Buffer.concat(parts);
}
