// The floor of slotproxy's own design, for the bench's "Node floor" row: every client multiplexed
// over ONE shared connection to one Redis, requests of one event-loop turn written to it with one
// write, a FIFO of the clients waiting for replies, the replies of one back-end read written to
// each client with one write, and a frame counter instead of a parser. Sockets read into one
// shared buffer, copied out per read (as slotproxy's proxy/net/socket-reader.ts does; written
// again here so the floor runs none of the product's code). No routing, no checks, no metrics:
// what any multiplexing Node proxy pays per request at the least.
// Usage: node dist/bench/mux-floor.js PORT REDIS_HOST:PORT
import net from 'node:net';

const [listenPort, redis] = process.argv.slice(2);
const [host, port] = (redis ?? '').split(':');
if (!listenPort || !host || !port) {
  console.error('usage: node dist/bench/mux-floor.js PORT REDIS_HOST:PORT');
  process.exit(2);
}

/** Length of the whole RESP frame at `at`, or -1 when `buf` does not hold all of it yet. */
function frameLength(buf: Buffer, at: number): number {
  const eol = buf.indexOf(13, at);
  if (eol < 0 || eol + 1 >= buf.length) return -1;
  const type = buf[at];
  if (type !== 42 && type !== 36) return eol + 2 - at; // + - : lines
  const n = Number(buf.toString('latin1', at + 1, eol));
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
class Frames {
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

const shared = Buffer.allocUnsafeSlow(64 * 1024);
function copyOut(n: number): Buffer {
  const chunk = Buffer.allocUnsafe(n);
  shared.copy(chunk, 0, 0, n);
  return chunk;
}

/** Reads an accepted (paused) socket into `shared` through the fields Node's `onread` option sets. */
function readInto(socket: net.Socket, onChunk: (chunk: Buffer) => void): void {
  const symbols = new Map(Object.getOwnPropertySymbols(socket).map((s) => [s.description, s]));
  const handle = (socket as unknown as { _handle: { useUserBuffer(b: Buffer): void } })._handle;
  const fields = socket as unknown as Record<symbol, unknown>;
  fields[symbols.get('kBuffer') as symbol] = shared;
  fields[symbols.get('kBufferCb') as symbol] = (n: number) => onChunk(copyOut(n));
  handle.useUserBuffer(shared);
  socket.resume();
}

const waiting: net.Socket[] = []; // one entry per request in flight, in order
let head = 0;
let out: Buffer[] = [];
const replies = new Frames();
/** Replies of one back-end read, gathered per client so that each client gets one write. */
const gathered = new Map<net.Socket, Buffer[]>();
const onReplies = (chunk: Buffer): void => {
  replies.each(chunk, (frame) => {
    const client = waiting[head++];
    const frames = gathered.get(client);
    if (frames === undefined) gathered.set(client, [frame]);
    else frames.push(frame);
  });
  for (const [client, frames] of gathered) client.write(frames.length === 1 ? frames[0] : Buffer.concat(frames));
  gathered.clear();
};
const backend = net.connect({ host, port: Number(port), noDelay: true, onread: { buffer: shared, callback: (n) => (onReplies(copyOut(n)), true) } });
backend.on('error', (err) => {
  console.error(`mux-floor: ${err.message}`);
  process.exit(1);
});
const flush = (): void => {
  if (head > 65536) {
    waiting.splice(0, head);
    head = 0;
  }
  backend.write(out.length === 1 ? out[0] : Buffer.concat(out));
  out = [];
};

net
  .createServer({ noDelay: true, pauseOnConnect: true }, (client) => {
    const requests = new Frames();
    readInto(client, (chunk) =>
      requests.each(chunk, (frame) => {
        if (out.length === 0) setImmediate(flush);
        out.push(frame);
        waiting.push(client);
      }),
    );
    client.on('error', () => undefined);
  })
  .listen(Number(listenPort), '127.0.0.1');
