// Jest helper: one raw RESP conversation with a server, every byte of the replies kept.

import net from 'node:net';
import { ReplyFramer } from '../../proxy/resp/reply-framer';

const SENTINEL = '__end_of_exchange__';
const SENTINEL_REPLY = `$${SENTINEL.length}\r\n${SENTINEL}\r\n`;
/** Longest wait for one exchange. */
const EXCHANGE_TIMEOUT_MS = 10_000;

export interface Exchange {
  /** Everything the server sent before the sentinel (latin1, so every byte is kept). */
  replies: string;
  /** The server closed the connection before answering the sentinel. */
  closed: boolean;
}

/** A request: its arguments, or bytes sent exactly as given (malformed input, inline commands). */
export type RawRequest = readonly string[] | string;

export function encodeRequest(args: RawRequest): string {
  if (typeof args === 'string') return args;
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

/**
 * Sends `requests` on a new connection, then `ECHO <sentinel>`, and collects the replies until the
 * sentinel's reply arrives or the server closes the connection. A request with replies turned off
 * (CLIENT REPLY OFF) must be followed by CLIENT REPLY ON for the sentinel to be seen.
 */
export function exchange(port: number, requests: readonly RawRequest[]): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no sentinel within ${EXCHANGE_TIMEOUT_MS} ms; received ${JSON.stringify(received)}`));
    }, EXCHANGE_TIMEOUT_MS);
    const finish = (result: Exchange): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    socket.on('connect', () => socket.write(requests.map(encodeRequest).join('') + encodeRequest(['ECHO', SENTINEL])));
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      if (received.endsWith(SENTINEL_REPLY)) finish({ replies: received.slice(0, -SENTINEL_REPLY.length), closed: false });
    });
    socket.on('error', () => undefined); // 'close' follows
    socket.on('close', () => finish({ replies: received, closed: true }));
  });
}

/** `replies` (as an Exchange holds them) cut into whole top-level replies; a cut-off tail is left out. */
export function splitReplies(replies: string): string[] {
  const frames: string[] = [];
  new ReplyFramer().push(Buffer.from(replies, 'latin1'), (frame) => frames.push(frame.toString('latin1')));
  return frames;
}
