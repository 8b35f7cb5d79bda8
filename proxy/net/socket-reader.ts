/**
 * Socket reads without a fresh buffer per read. By default Node allocates a 64 KiB buffer for
 * every read, shrinks it to what arrived, wraps it in an ArrayBuffer the GC must track, and passes
 * it through the Readable stream's 'data' machinery. Here every plain TCP socket of the proxy reads
 * into one shared buffer (a read callback runs to its end before the next read), and the bytes are
 * copied out into a small slice of Node's buffer pool that the receiver may keep. At one request
 * per read (no pipelining) it took a fifth off the proxy's CPU per request (bench/NOTES.md, round 3).
 *
 * Back-end sockets use Node's public `onread` option. Accepted client sockets have no public way to
 * it in Node 20, so `readAccepted` sets the same two fields `onread` sets, found by their symbol
 * names; when they are not there (another Node), it says so and the caller reads 'data' events.
 * test/unit/socket-reader.test.ts fails when this Node no longer takes the fast path.
 */
// Imported, not the global: Node 20's global `Buffer` is a getter, called on every use (bench/NOTES.md, round 10).
import { Buffer } from 'node:buffer';
import net from 'node:net';
import tls from 'node:tls';

/** Node's default read size (libuv suggests 64 KiB). */
const READ_BUFFER_BYTES = 64 * 1024;
const shared = Buffer.allocUnsafeSlow(READ_BUFFER_BYTES);

/** Called with `this` bound to the socket read, so one function can serve every socket. */
export type OnBytes = (this: net.Socket, chunk: Buffer) => void;

/** The bytes of one read, copied out of the shared buffer: small reads into a slice of Node's pool. */
function copyOut(n: number): Buffer {
  const chunk = Buffer.allocUnsafe(n);
  shared.copy(chunk, 0, 0, n);
  return chunk;
}

/**
 * `onread` for `net.connect()`, or `new net.Socket()` (Node reads it there too; @types/node lists it
 * for connect only): every read reaches `onBytes` as a buffer of its own.
 */
export function onreadOption(onBytes: (chunk: Buffer) => void): net.OnReadOpts {
  return {
    buffer: shared,
    callback: (n: number) => {
      onBytes(copyOut(n));
      return true; // keep reading: back-pressure pauses the socket itself
    },
  };
}

interface UserBufferHandle {
  useUserBuffer(buffer: Uint8Array): void;
}

/** The socket fields net.Socket's constructor fills from `onread` (lib/net.js: kBuffer, kBufferCb, kBufferGen). */
function onreadFields(socket: net.Socket): { buffer: symbol; callback: symbol; generator: symbol } | null {
  let buffer: symbol | null = null;
  let callback: symbol | null = null;
  let generator: symbol | null = null;
  for (const s of Object.getOwnPropertySymbols(socket)) {
    if (s.description === 'kBuffer') buffer = s;
    else if (s.description === 'kBufferCb') callback = s;
    else if (s.description === 'kBufferGen') generator = s;
  }
  return buffer === null || callback === null || generator === null ? null : { buffer, callback, generator };
}

/**
 * The `kBufferCb` of every accepted socket read by `onBytes`: one function per `onBytes`, shared by
 * all its sockets (Node calls it with `this` bound to the socket), so a client costs no closure.
 */
const acceptedCallbacks = new WeakMap<OnBytes, (this: net.Socket, n: number) => boolean>();

function acceptedCallback(onBytes: OnBytes): (this: net.Socket, n: number) => boolean {
  let callback = acceptedCallbacks.get(onBytes);
  if (callback === undefined) {
    callback = function (this: net.Socket, n: number): boolean {
      onBytes.call(this, copyOut(n));
      return true; // keep reading: back-pressure pauses the socket itself
    };
    acceptedCallbacks.set(onBytes, callback);
  }
  return callback;
}

/**
 * Starts reading an accepted socket into the shared buffer, as `onread` would: a plain one comes
 * paused (its server has `pauseOnConnect: true`). Returns false when it reads 'data' events instead:
 * a TLS socket (the TLS layer reads the TCP socket), or a Node whose sockets lack the fields needed.
 */
export function readAccepted(socket: net.Socket, onBytes: OnBytes): boolean {
  const fast = !(socket instanceof tls.TLSSocket) && attach(socket, onBytes);
  if (!fast) socket.on('data', onBytes);
  socket.resume();
  return fast;
}

function attach(socket: net.Socket, onBytes: OnBytes): boolean {
  const handle = (socket as unknown as { _handle?: Partial<UserBufferHandle> | null })._handle;
  if (handle === null || handle === undefined || typeof handle.useUserBuffer !== 'function') return false;
  const fields = onreadFields(socket);
  if (fields === null) return false;
  const s = socket as unknown as Record<symbol, unknown>;
  if (s[fields.buffer] !== null || s[fields.generator] !== null) return false; // already reading some other way
  s[fields.buffer] = shared;
  s[fields.callback] = acceptedCallback(onBytes);
  handle.useUserBuffer(shared);
  return true;
}
