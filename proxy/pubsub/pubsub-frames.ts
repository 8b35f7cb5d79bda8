/**
 * The frames of subscribed mode the proxy reads or writes itself: the prefixes it recognises
 * messages by, (un)subscribe confirmations and PING's reply as one server writes them, and the
 * RESP2 -> RESP3 push conversion, and which keyspace notifications an event link passes on. Pure:
 * bytes in, bytes out.
 */
import * as encode from '../resp/encode';
import { isKeyspaceChannel } from './keyspace-channels';

export const MESSAGE = Buffer.from('*3\r\n$7\r\nmessage\r\n');
export const PMESSAGE = Buffer.from('*4\r\n$8\r\npmessage\r\n');
export const SMESSAGE = Buffer.from('*3\r\n$8\r\nsmessage\r\n');

/** A (un)subscribe confirmation as a single server writes it: an array in RESP2, a push frame in RESP3. */
export function confirmationFrame(protocol: 2 | 3, kind: string, channel: Buffer | null, count: number): Buffer {
  if (protocol === 3) return encode.pushOfFrames([encode.bulk(kind), channel === null ? encode.RESP3_NULL : encode.bulk(channel), encode.integer(count)]);
  return encode.arrayOfFrames([encode.bulk(kind), encode.bulk(channel), encode.integer(count)]);
}

export const EMPTY = Buffer.alloc(0);

/**
 * A message for a RESP3 client. The links speak RESP2 (so messages and confirmations parse the same
 * whatever the client's protocol), and a message holds only bulk strings, so `*` -> `>` makes it
 * the push frame Redis would send.
 */
export function asPush(frame: Buffer): Buffer {
  const push = Buffer.from(frame);
  push[0] = 62; // '>'
  return push;
}

/** PING in subscribed mode (RESP2): `*2 pong <arg or "">`. */
export function pubsubPong(args: Buffer[]): Buffer {
  return encode.arrayOfFrames([encode.bulk('pong'), encode.bulk(args.length > 1 ? args[1] : Buffer.alloc(0))]);
}

export function startsWith(frame: Buffer, prefix: Buffer): boolean {
  return frame.length > prefix.length && frame.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;
}

/** The bulk string `$<n>\r\n<bytes>\r\n` at `at` in a message frame, and where the next element starts. */
export function bulkAt(frame: Buffer, at: number): { value: Buffer; next: number } | null {
  if (frame[at] !== 36 /* $ */) return null;
  const headerEnd = frame.indexOf('\r\n', at, 'latin1');
  if (headerEnd < 0) return null;
  const length = Number(frame.toString('latin1', at + 1, headerEnd));
  const start = headerEnd + 2;
  if (!Number.isInteger(length) || length < 0 || start + length > frame.length) return null;
  return { value: frame.subarray(start, start + length), next: start + length + 2 };
}

/**
 * Whether an event link passes `frame` on: a keyspace notification of a channel or pattern the
 * client still has (by name). Any other message (PUBLISHed: the bus brings it to the home too)
 * comes from the home link only.
 */
export function wantedKeyspaceEvent(frame: Buffer, channels: ReadonlyMap<string, Buffer>, patterns: ReadonlyMap<string, Buffer>): boolean {
  if (startsWith(frame, MESSAGE)) {
    const channel = bulkAt(frame, MESSAGE.length);
    return channel !== null && isKeyspaceChannel(channel.value) && channels.has(channel.value.toString('latin1'));
  }
  if (!startsWith(frame, PMESSAGE)) return false;
  const pattern = bulkAt(frame, PMESSAGE.length);
  const channel = pattern === null ? null : bulkAt(frame, pattern.next);
  return channel !== null && pattern !== null && isKeyspaceChannel(channel.value) && patterns.has(pattern.value.toString('latin1'));
}
