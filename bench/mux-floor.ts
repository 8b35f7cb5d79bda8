// The floor of slotproxy's own design, for the bench's "Node floor" rows: every client multiplexed
// over ONE shared connection per Redis node, the requests of one event-loop turn written to each
// node with one write, a FIFO per node of the reply slots waiting on it, and each client's
// completed replies written in order with one write per turn. A frame counter instead of a parser.
// Sockets read into one shared buffer, copied out per read (as slotproxy's proxy/net/socket-reader.ts
// does; written again here so the floor runs none of the product's code). No checks, no metrics:
// what any multiplexing Node proxy pays per request at the least.
//
// Two back ends, as slotproxy's two rows: standalone nodes (the node picked from the key's last byte
// instead of a hash ring), or a Redis Cluster (`--cluster SEED`: the slot map read once from
// CLUSTER SLOTS, the key's CRC16 slot computed, nothing else: no MOVED, no refresh). An MGET or MSET
// whose keys live on several nodes (several slots, in front of a cluster) is split as slotproxy's
// `crossSlot: split` and twemproxy split it: in front of standalone nodes one MGET/MSET per node with
// that node's keys, in front of a cluster one part per slot (a cluster node refuses keys of several
// slots), a one-key part sent as GET/SET there; the replies merged in key order.
// Usage: node dist/bench/mux-floor.js PORT REDIS_HOST:PORT [REDIS_HOST:PORT ...]
//        node dist/bench/mux-floor.js PORT --cluster SEED_HOST:PORT
import net from 'node:net';

const [listenPort, ...backendArgs] = process.argv.slice(2);
const clusterSeed = backendArgs[0] === '--cluster' ? backendArgs[1] : null;
const nodeAddresses = clusterSeed === null ? backendArgs : [clusterSeed];
if (!listenPort || nodeAddresses.length === 0 || nodeAddresses.some((a) => !/^[^:]+:\d+$/.test(a ?? ''))) {
  console.error('usage: node dist/bench/mux-floor.js PORT REDIS_HOST:PORT [REDIS_HOST:PORT ...] | PORT --cluster SEED_HOST:PORT');
  process.exit(2);
}

/** The decimal integer in `buf` from `from` to `to` (RESP lengths: digits, maybe a minus sign). */
function parseLength(buf: Buffer, from: number, to: number): number {
  let n = 0;
  for (let i = buf[from] === 45 ? from + 1 : from; i < to; i++) n = n * 10 + buf[i] - 48;
  return buf[from] === 45 ? -n : n;
}

/** Where the CR ending the line at `at` is, or -1: a byte loop (RESP lines are short, a native call costs more). */
function crAt(buf: Buffer, at: number): number {
  for (let i = at; i < buf.length; i++) if (buf[i] === 13) return i;
  return -1;
}

/** Copies src[start, end) to `out` at `at`, returning where the next byte goes: a byte loop below 64 bytes, as slotproxy copies. */
function copyRange(src: Buffer, start: number, end: number, out: Buffer, at: number): number {
  if (end - start > 64) return at + src.copy(out, at, start, end);
  for (let i = start; i < end; i++) out[at++] = src[i];
  return at;
}

/** Length of the whole RESP frame at `at`, or -1 when `buf` does not hold all of it yet. */
function frameLength(buf: Buffer, at: number): number {
  const eol = crAt(buf, at);
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

/** A split MGET/MSET: the replies of its parts, merged in key order once all are in. */
class Merge {
  private readonly parts: (Buffer | undefined)[];
  private missing: number;
  constructor(
    private readonly client: Client,
    private readonly seq: number,
    private readonly isGet: boolean,
    /** Each part's keys, by their place among the request's keys. */
    private readonly partKeys: number[][],
    private readonly keyCount: number,
  ) {
    this.parts = new Array<Buffer | undefined>(partKeys.length);
    this.missing = partKeys.length;
  }
  fill(index: number, frame: Buffer): void {
    this.parts[index] = frame;
    if (--this.missing > 0) return;
    const reply = this.isGet ? this.values() : OK;
    if (this.client.fill(this.seq, reply)) ready.add(this.client);
  }
  /** MGET: each part's value frames (a GET part's reply is one) copied in key order after one header. */
  private values(): Buffer {
    const n = this.keyCount;
    const bounds = new Array<number>(3 * n); // per key: part, start, end
    const header = arrayHeader(n);
    let size = header.length;
    for (let p = 0; p < this.parts.length; p++) {
      const frame = this.parts[p] as Buffer;
      const keys = this.partKeys[p];
      const isArray = frame[0] === 42; /* * */
      let at = isArray ? crAt(frame, 0) + 2 : 0;
      for (let j = 0; j < keys.length; j++) {
        const len = isArray ? frameLength(frame, at) : frame.length;
        bounds[3 * keys[j]] = p;
        bounds[3 * keys[j] + 1] = at;
        bounds[3 * keys[j] + 2] = at + len;
        size += len;
        at += len;
      }
    }
    const out = Buffer.allocUnsafe(size);
    let at = copyRange(header, 0, header.length, out, 0);
    for (let k = 0; k < n; k++) at = copyRange(this.parts[bounds[3 * k]] as Buffer, bounds[3 * k + 1], bounds[3 * k + 2], out, at);
    return out;
  }
}
const OK = Buffer.from('+OK\r\n');

/** What a node's reply goes to: a client's place in its reply order, or a part of a split request. */
interface Waiting {
  client: Client;
  seq: number;
  merge: Merge | null;
  index: number;
}

/** One Redis node: one connection, the requests of this turn, the replies it owes in order. */
class Node {
  private out: Buffer[] = [];
  private readonly waiting: Waiting[] = [];
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
    this.waiting.push({ client, seq: client.expect(), merge: null, index: 0 });
  }
  queuePart(frame: Buffer, merge: Merge, index: number, client: Client): void {
    this.out.push(frame);
    this.waiting.push({ client, seq: 0, merge, index });
  }
  send(): void {
    if (this.out.length === 0) return;
    this.socket.write(this.out.length === 1 ? this.out[0] : Buffer.concat(this.out));
    this.out = [];
  }
  private onChunk(chunk: Buffer): void {
    this.replies.each(chunk, (frame) => {
      const w = this.waiting[this.next++];
      if (w.merge !== null) w.merge.fill(w.index, frame);
      else if (w.client.fill(w.seq, frame)) ready.add(w.client);
    });
    if (this.next >= 1024) {
      this.waiting.splice(0, this.next);
      this.next = 0;
    }
    scheduleFlush();
  }
}
let nodes: Node[] = [];
/** Cluster mode: the node serving each slot, from CLUSTER SLOTS. */
let slotOwners: Node[] | null = null;

/** Where each argument of a request `*N $len arg ...` lies: [start, end) pairs, flat. */
function argBounds(frame: Buffer): number[] {
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

/** The node for the key at [start, end) of `frame`. */
function nodeOfKey(frame: Buffer, start: number, end: number): Node {
  if (slotOwners !== null) return slotOwners[slotOf(frame, start, end)];
  return nodes[nodeIndex(frame, start, end)];
}

/** In front of standalone nodes: the index of the key's node, from its last byte. */
function nodeIndex(frame: Buffer, start: number, end: number): number {
  return end > start ? frame[end - 1] % nodes.length : 0;
}

/** Routes one request: by its first key, or split per key when an MGET/MSET spans nodes. */
function route(frame: Buffer, client: Client): void {
  if (nodes.length === 1) return nodes[0].queue(frame, client);
  const b = argBounds(frame);
  if (b.length < 4) return nodes[0].queue(frame, client); // no key (PING)
  const first = nodeOfKey(frame, b[2], b[3]);
  const cmdLen = b[1] - b[0];
  if (cmdLen === 4 && b.length > 4) {
    const c0 = frame[b[0]] | 0x20;
    const isGet = c0 === 0x6d /* m */ && (frame[b[0] + 1] | 0x20) === 0x67; // mget
    const isSet = c0 === 0x6d && (frame[b[0] + 1] | 0x20) === 0x73; // mset
    if (isGet || isSet) {
      const stride = isGet ? 1 : 2;
      // A cluster node refuses keys of several slots even when it serves them all: split by slot there.
      let spans = false;
      if (slotOwners !== null) {
        const slot = slotOf(frame, b[2], b[3]);
        for (let i = 1 + stride; 2 * i < b.length; i += stride) if (slotOf(frame, b[2 * i], b[2 * i + 1]) !== slot) spans = true;
      } else {
        for (let i = 1 + stride; 2 * i < b.length; i += stride) if (nodeOfKey(frame, b[2 * i], b[2 * i + 1]) !== first) spans = true;
      }
      if (spans) return split(frame, b, isGet, stride, client);
    }
  }
  first.queue(frame, client);
}

/**
 * One part per node in front of standalone nodes, per slot in front of a cluster, keys and shards
 * in first-seen order; each part's `$len` headers and bytes copied from the request as they are.
 */
function split(frame: Buffer, b: number[], isGet: boolean, stride: number, client: Client): void {
  const count = (b.length / 2 - 1) / stride;
  const shards: number[] = [];
  const partKeys: number[][] = [];
  for (let k = 0; k < count; k++) {
    const i = 1 + k * stride;
    const shard = slotOwners !== null ? slotOf(frame, b[2 * i], b[2 * i + 1]) : nodeIndex(frame, b[2 * i], b[2 * i + 1]);
    let p = 0;
    while (p < shards.length && shards[p] !== shard) p++;
    if (p === shards.length) {
      shards.push(shard);
      partKeys.push([]);
    }
    partKeys[p].push(k);
  }
  const merge = new Merge(client, client.expect(), isGet, partKeys, count);
  for (let p = 0; p < shards.length; p++) {
    const keys = partKeys[p];
    // A cluster's one-key part goes as GET/SET, as slotproxy cluster sends it; a ring's keeps MGET/MSET.
    const single = slotOwners !== null && keys.length === 1;
    const head = single ? (isGet ? GET_HEAD : SET_HEAD) : multiHead(isGet, 1 + keys.length * stride);
    let size = head.length;
    const first = 2 * (1 + keys[0] * stride);
    for (const k of keys) {
      const i = 1 + k * stride;
      size += withHeaderEnd(b, i + stride - 1) - withHeaderStart(b, i);
    }
    const out = Buffer.allocUnsafe(size);
    let at = copyRange(head, 0, head.length, out, 0);
    for (const k of keys) {
      const i = 1 + k * stride;
      at = copyRange(frame, withHeaderStart(b, i), withHeaderEnd(b, i + stride - 1), out, at);
    }
    const node = slotOwners !== null ? slotOwners[shards[p]] : nodeOfKey(frame, b[first], b[first + 1]);
    node.queuePart(out, merge, p, client);
  }
}
/** `*<n>\r\n` and the command, made once per argument count. */
const MULTI_HEADS: Buffer[][] = [[], []];
function multiHead(isGet: boolean, n: number): Buffer {
  const heads = MULTI_HEADS[isGet ? 0 : 1];
  return (heads[n] ??= Buffer.from(`*${n}\r\n$4\r\n${isGet ? 'MGET' : 'MSET'}\r\n`, 'latin1'));
}
const ARRAY_HEADERS: Buffer[] = [];
function arrayHeader(n: number): Buffer {
  return (ARRAY_HEADERS[n] ??= Buffer.from(`*${n}\r\n`, 'latin1'));
}
const GET_HEAD = Buffer.from('*2\r\n$3\r\nGET\r\n');
const SET_HEAD = Buffer.from('*3\r\n$3\r\nSET\r\n');
/** Where argument `i` begins with its `$<len>\r\n` header. */
function withHeaderStart(b: number[], i: number): number {
  return b[2 * i] - String(b[2 * i + 1] - b[2 * i]).length - 3;
}
/** Where argument `i` ends with its CRLF. */
function withHeaderEnd(b: number[], i: number): number {
  return b[2 * i + 1] + 2;
}

// CRC16 (XMODEM) of the key, or of its hash tag, modulo 16384: Redis Cluster's key slot.
const CRC_TABLE = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let crc = i << 8;
  for (let j = 0; j < 8; j++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  CRC_TABLE[i] = crc;
}
function slotOf(buf: Buffer, start: number, end: number): number {
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

/** CLUSTER SLOTS from the seed, read once: the masters and the slot table. */
async function loadSlots(seed: string): Promise<void> {
  const [host, port] = seed.split(':');
  const reply = await new Promise<Buffer>((resolve, reject) => {
    const socket = net.connect({ host, port: Number(port) }, () => socket.write('*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n'));
    let got = Buffer.alloc(0);
    socket.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      if (frameLength(got, 0) === got.length) {
        socket.destroy();
        resolve(got);
      }
    });
    socket.on('error', reject);
  });
  const text = reply.toString('latin1');
  // Each range: *N :start :end *M $host :port $id ...; only the master (the first node) matters.
  const ranges = [...text.matchAll(/:(\d+)\r\n:(\d+)\r\n\*\d+\r\n\$\d+\r\n([^\r]*)\r\n:(\d+)\r\n/g)];
  const byAddress = new Map<string, Node>();
  slotOwners = new Array<Node>(16384);
  for (const [, start, end, h, p] of ranges) {
    const address = `${h === '' ? host : h}:${p}`;
    let node = byAddress.get(address);
    if (node === undefined) byAddress.set(address, (node = new Node(address)));
    for (let slot = Number(start); slot <= Number(end); slot++) slotOwners[slot] = node;
  }
  nodes = [...byAddress.values()];
}

async function main(): Promise<void> {
  if (clusterSeed !== null) await loadSlots(clusterSeed);
  else nodes = nodeAddresses.map((a) => new Node(a));
  net
    .createServer({ noDelay: true, pauseOnConnect: true }, (socket) => {
      const client = new Client(socket);
      const requests = new Frames();
      readInto(socket, (chunk) => {
        requests.each(chunk, (frame) => route(frame, client));
        scheduleFlush();
      });
      socket.on('error', () => undefined);
    })
    .listen(Number(listenPort), '127.0.0.1', () => console.log(`mux-floor listening on 127.0.0.1:${listenPort}`));
}

// An orderly exit on SIGTERM, so that `node --cpu-prof` writes its profile.
process.on('SIGTERM', () => process.exit(0));

main().catch((err: Error) => {
  console.error(`mux-floor: ${err.message}`);
  process.exit(1);
});
