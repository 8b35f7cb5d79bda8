// The floor of slotproxy's own design, for the bench's "Node floor" row: every client multiplexed
// over ONE shared connection per Redis node (the same three standalone nodes twemproxy and the ring
// front), the requests of one event-loop turn written to each node with one write, a FIFO per node
// of the reply slots waiting on it, and each client's completed replies written in order with one
// write per turn. A frame counter instead of a parser, and the node picked from the key's last byte
// instead of a hash ring or a slot table. Sockets read into one shared buffer, copied out per read
// (as slotproxy's proxy/net/socket-reader.ts does; written again here so the floor runs none of the
// product's code). No checks, no metrics, no splitting: what any multiplexing Node proxy pays per
// request at the least.
// Usage: node dist/bench/mux-floor.js PORT REDIS_HOST:PORT [REDIS_HOST:PORT ...]
import net from 'node:net';

const [listenPort, ...nodeAddresses] = process.argv.slice(2);
if (!listenPort || nodeAddresses.length === 0 || nodeAddresses.some((a) => !/^[^:]+:\d+$/.test(a))) {
  console.error('usage: node dist/bench/mux-floor.js PORT REDIS_HOST:PORT [REDIS_HOST:PORT ...]');
  process.exit(2);
}

/** The decimal integer in `buf` from `from` to `to` (RESP lengths: digits, maybe a minus sign). */
function parseLength(buf: Buffer, from: number, to: number): number {
  let n = 0;
  for (let i = buf[from] === 45 ? from + 1 : from; i < to; i++) n = n * 10 + buf[i] - 48;
  return buf[from] === 45 ? -n : n;
}

/** Length of the whole RESP frame at `at`, or -1 when `buf` does not hold all of it yet. */
function frameLength(buf: Buffer, at: number): number {
  const eol = buf.indexOf(13, at);
  if (eol < 0 || eol + 1 >= buf.length) return -1;
  const type = buf[at];
  if (type !== 42 && type !== 36) return eol + 2 - at; // + - : lines
  const n = parseLength(buf, at + 1, eol);
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

/**
 * One accepted client: its replies in request order. Requests are numbered from 0 for the life of
 * the connection; `replies[i]` holds the reply of request `base + i`, and `head` is the number of the
 * first reply not yet written.
 */
class Client {
  private replies: (Buffer | undefined)[] = [];
  private base = 0;
  private head = 0;
  constructor(readonly socket: net.Socket) {}
  /** The number of a new request, whose reply is still to come. */
  expect(): number {
    this.replies.push(undefined);
    return this.base + this.replies.length - 1;
  }
  /** Fills in the reply of request `seq`; true when it is the next one to write. */
  fill(seq: number, reply: Buffer): boolean {
    this.replies[seq - this.base] = reply;
    return seq === this.head;
  }
  /** Writes every reply from `head` up to the first still missing, in one write. */
  writeReady(): void {
    const frames: Buffer[] = [];
    for (let r = this.replies[this.head - this.base]; r !== undefined; r = this.replies[this.head - this.base]) {
      frames.push(r);
      this.head++;
    }
    // Drop written replies once all are written (or many are), so the list stays short.
    if (this.head - this.base === this.replies.length || this.head - this.base >= 4096) {
      this.replies = this.replies.slice(this.head - this.base);
      this.base = this.head;
    }
    if (frames.length > 0) this.socket.write(frames.length === 1 ? frames[0] : Buffer.concat(frames));
  }
}

const ready = new Set<Client>();
let flushScheduled = false;
/** Once per turn: each node gets this turn's requests, each client with its next reply in gets its replies. */
function flushTurn(): void {
  flushScheduled = false;
  for (const node of nodes) node.send();
  for (const client of ready) client.writeReady();
  ready.clear();
}
function scheduleFlush(): void {
  if (flushScheduled) return;
  flushScheduled = true;
  setImmediate(flushTurn);
}

/** One Redis node: one connection, the requests of this turn, the replies it owes in order. */
class Node {
  private out: Buffer[] = [];
  private readonly waiting: { client: Client; seq: number }[] = [];
  private next = 0;
  private readonly replies = new Frames();
  private readonly socket: net.Socket;
  constructor(address: string) {
    const [host, port] = address.split(':');
    this.socket = net.connect({ host, port: Number(port), noDelay: true, onread: { buffer: shared, callback: (n) => (this.onChunk(copyOut(n)), true) } });
    this.socket.on('error', (err) => {
      console.error(`mux-floor: ${address}: ${err.message}`);
      process.exit(1);
    });
  }
  queue(frame: Buffer, client: Client): void {
    this.out.push(frame);
    this.waiting.push({ client, seq: client.expect() });
  }
  send(): void {
    if (this.out.length === 0) return;
    this.socket.write(this.out.length === 1 ? this.out[0] : Buffer.concat(this.out));
    this.out = [];
  }
  private onChunk(chunk: Buffer): void {
    this.replies.each(chunk, (frame) => {
      const { client, seq } = this.waiting[this.next++];
      if (client.fill(seq, frame)) ready.add(client);
    });
    if (this.next > 65536) {
      this.waiting.splice(0, this.next);
      this.next = 0;
    }
    scheduleFlush();
  }
}
const nodes = nodeAddresses.map((a) => new Node(a));

/** The node for a request `*N $len CMD $len KEY ...`: the key's last byte, or the first node. */
function nodeFor(frame: Buffer): Node {
  if (nodes.length === 1) return nodes[0];
  let at = 0;
  for (let line = 0; line < 4; line++) {
    const lf = frame.indexOf(10, at); // past "*N", "$len", "CMD", "$len"
    if (lf < 0) return nodes[0]; // no key (PING)
    at = lf + 1;
  }
  const keyEnd = frame.indexOf(13, at);
  return keyEnd > at ? nodes[frame[keyEnd - 1] % nodes.length] : nodes[0];
}

net
  .createServer({ noDelay: true, pauseOnConnect: true }, (socket) => {
    const client = new Client(socket);
    const requests = new Frames();
    readInto(socket, (chunk) => {
      requests.each(chunk, (frame) => nodeFor(frame).queue(frame, client));
      scheduleFlush();
    });
    socket.on('error', () => undefined);
  })
  .listen(Number(listenPort), '127.0.0.1', () => console.log(`mux-floor listening on 127.0.0.1:${listenPort}`));
