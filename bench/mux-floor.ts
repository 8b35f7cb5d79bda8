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
//
// Double-write (issue 32: what a migration's write costs at the least): with `--to-ring ADDR` (ring
// B is ring A plus that node; a key moves there when its last byte % 3 is 2, about a third of the
// keys, as ketama moves growing from 2 nodes to 3) or `--to-cluster SEED` (every key moves), a write
// to a key that moves is sent to its node in A followed by `DUMP key` on the same connection (so the
// dump is the state right after the write), the dump is sent as `RESTORE key 0 dump REPLACE` to its
// owner in B, and only then does the client get A's reply (`--carry sync`, slotproxy's contract). No
// MULTI, no versions, no fingerprints, no change feed. `--carry feed` instead answers at once and
// copies what a change feed names: one RESP3 `CLIENT TRACKING ON BCAST` connection per node of A,
// each named key that moves copied DUMP then RESTORE, nobody waiting. `--versions` (with either
// carry) orders the copies as convergence under several writers needs: a script on A takes
// `HINCRBY versions key 1` and `DUMP key` in place of the DUMP, a script on B restores only a
// version above the one it holds (slotproxy's SNAPSHOT/APPLY without fingerprints, MULTI or TTLs).
// Usage: node dist/bench/mux-floor.js PORT REDIS_HOST:PORT [REDIS_HOST:PORT ...]
//        node dist/bench/mux-floor.js PORT --cluster SEED_HOST:PORT
//        node dist/bench/mux-floor.js PORT A_HOST:PORT ... (--to-ring HOST:PORT | --to-cluster SEED) [--carry sync|feed] [--versions]
import net from 'node:net';
import { Frames, argBounds, copyOut, copyRange, crAt, frameLength, readInto, shared, slotOf } from './floor-resp';
import { SCRIPT_LOADS, Snapshot, applyBatch, parseSnapshots, snapshotBatch } from './floor-versions';

const [listenPort, ...backendArgs] = process.argv.slice(2);
/** Takes `--name VALUE` out of backendArgs. */
function option(name: string): string | null {
  const i = backendArgs.indexOf(name);
  return i < 0 ? null : (backendArgs.splice(i, 2)[1] ?? null);
}
const toRing = option('--to-ring');
const toCluster = option('--to-cluster');
const carry = option('--carry') ?? 'sync';
const versioned = backendArgs.includes('--versions') && backendArgs.splice(backendArgs.indexOf('--versions'), 1).length === 1;
const clusterSeed = backendArgs[0] === '--cluster' ? backendArgs[1] : null;
const nodeAddresses = clusterSeed === null ? backendArgs : [clusterSeed];
if (!listenPort || nodeAddresses.length === 0 || nodeAddresses.some((a) => !/^[^:]+:\d+$/.test(a ?? ''))) {
  console.error('usage: node dist/bench/mux-floor.js PORT REDIS_HOST:PORT [REDIS_HOST:PORT ...] | PORT --cluster SEED_HOST:PORT');
  process.exit(2);
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
  if (versioned) queueBatches();
  for (const node of everyNode) node.send();
  for (const client of ready) client.writeReady();
  ready.clear();
}
function scheduleFlush(): void {
  if (flushScheduled) return;
  flushScheduled = true;
  setImmediate(flushTurn);
}

/** A split MGET/MSET: the replies of its parts, merged in key order once all are in. */
class Merge implements Parts {
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

/** A request made of parts whose replies come from several nodes: a split MGET/MSET, a double-write. */
interface Parts {
  fill(index: number, frame: Buffer): void;
}

/** What a node's reply goes to: a client's place in its reply order, or a part of a request made of parts. */
interface Waiting {
  client: Client | null;
  seq: number;
  merge: Parts | null;
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
    everyNode.push(this);
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
  queuePart(frame: Buffer, merge: Parts, index: number): void {
    this.out.push(frame);
    this.waiting.push({ client: null, seq: 0, merge, index });
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
      else if (w.client !== null && w.client.fill(w.seq, frame)) ready.add(w.client);
    });
    if (this.next >= 1024) {
      this.waiting.splice(0, this.next);
      this.next = 0;
    }
    scheduleFlush();
  }
}
/** Ring A's nodes (or cluster A's masters); everyNode has ring or cluster B's too. */
let nodes: Node[] = [];
const everyNode: Node[] = [];
/** Cluster mode: the node serving each slot, from CLUSTER SLOTS. */
let slotOwners: Node[] | null = null;
/** Double-write: ring B's added node, or cluster B's node serving each slot. */
let ringAdded: Node | null = null;
let targetSlots: Node[] | null = null;

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
  if (ringAdded !== null || targetSlots !== null) return routeWrite(frame, client);
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
    node.queuePart(out, merge, p);
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

/** Double-write: the key's owner in B (its node in A when it does not move). */
function ownerInB(buf: Buffer, start: number, end: number, inA: Node): Node {
  if (targetSlots !== null) return targetSlots[slotOf(buf, start, end)];
  return end > start && buf[end - 1] % 3 === 2 ? (ringAdded as Node) : inA;
}

/**
 * Double-write: a write to a key that moves goes to A with `DUMP key` behind it; with `--carry
 * sync` the client's reply waits for the RESTORE on B. Anything else is forwarded.
 */
function routeWrite(frame: Buffer, client: Client): void {
  const b = argBounds(frame);
  if (b.length < 4) return nodes[0].queue(frame, client);
  const inA = nodeOfKey(frame, b[2], b[3]);
  const to = ownerInB(frame, b[2], b[3], inA);
  if (to === inA || carry === 'feed') return inA.queue(frame, client);
  const key = frame.subarray(withHeaderStart(b, 1), withHeaderEnd(b, 1));
  const copy = new Copy(client, client.expect(), key, to);
  inA.queuePart(frame, copy, 0);
  if (!versioned) return inA.queuePart(Buffer.concat([DUMP_HEAD, key]), copy, 1);
  batchSnapshot(inA, copy);
}
/** `--versions`: the copy joins this turn's SNAPSHOT script on its node of A. */
function batchSnapshot(inA: Node, copy: Copy): void {
  toSnapshot.get(inA)?.push(copy) ?? toSnapshot.set(inA, [copy]);
}

/** One key's copy: A's reply to the write (part 0), its DUMP (1), B's reply to RESTORE or DEL (2). */
class Copy implements Parts {
  private reply: Buffer | null = null;
  constructor(
    /** The client waiting for the write's reply; null for a copy the change feed asked for. */
    private readonly client: Client | null,
    private readonly seq: number,
    /** The key as a bulk, `$len\r\nkey\r\n`. */
    readonly key: Buffer,
    readonly to: Node,
  ) {}
  fill(index: number, frame: Buffer): void {
    if (index === 0) this.reply = frame;
    else if (index === 1) {
      const gone = frame[0] === 36 && frame[1] === 45; // $-1: no such key
      this.to.queuePart(gone ? Buffer.concat([DEL_HEAD, this.key]) : Buffer.concat([RESTORE_HEAD, this.key, TTL_NONE, frame, REPLACE]), this, 2);
    } else if (copied(frame) && this.client !== null && this.client.fill(this.seq, this.reply as Buffer)) ready.add(this.client);
  }
}
const DUMP_HEAD = Buffer.from('*2\r\n$4\r\nDUMP\r\n');
const DEL_HEAD = Buffer.from('*2\r\n$3\r\nDEL\r\n');
const RESTORE_HEAD = Buffer.from('*5\r\n$7\r\nRESTORE\r\n');
const TTL_NONE = Buffer.from('$1\r\n0\r\n');
const REPLACE = Buffer.from('$7\r\nREPLACE\r\n');

/** `--versions`: each node of A's moved keys of this turn, and each node of B's snapshots to apply (floor-versions.ts). */
const toSnapshot = new Map<Node, Copy[]>();
const toApply = new Map<Node, { copies: Copy[]; snapshots: Snapshot[] }>();
/** At the end of a turn, before the nodes are written: one SNAPSHOT per node of A, one APPLY per node of B. */
function queueBatches(): void {
  for (const [node, copies] of toSnapshot) {
    node.queuePart(snapshotBatch(copies.map((c) => c.key)), { fill: (_, reply) => snapshotted(copies, parseSnapshots(scriptReply(reply))) }, 0);
  }
  toSnapshot.clear();
  for (const [node, { copies, snapshots }] of toApply) {
    node.queuePart(applyBatch(copies.map((c) => c.key), snapshots, targetSlots !== null), { fill: (_, reply) => copies.forEach((c) => c.fill(2, reply)) }, 0);
  }
  toApply.clear();
}
/** B's reply to a copy or a script's; an error (NOSCRIPT, a cluster's refusal) ends the floor: it has no way to answer it. */
function scriptReply(reply: Buffer): Buffer {
  if (reply[0] !== 45) return reply;
  console.error(`mux-floor: ${reply.toString('latin1').trim()}`);
  process.exit(1);
}
const copied = (reply: Buffer): boolean => scriptReply(reply) === reply;
function snapshotted(copies: readonly Copy[], snapshots: readonly Snapshot[]): void {
  copies.forEach((copy, i) => {
    let batch = toApply.get(copy.to);
    if (batch === undefined) toApply.set(copy.to, (batch = { copies: [], snapshots: [] }));
    batch.copies.push(copy);
    batch.snapshots.push(snapshots[i]);
  });
}

/**
 * `--carry feed`: a RESP3 connection to a node of A on which it names every key that changes
 * (`>2 $10 invalidate *N $len key ...`); each one that moves is copied through the node's shared
 * connection, DUMP there, then RESTORE on its owner in B.
 */
function openFeed(address: string, inA: Node): void {
  const [host, port] = address.split(':');
  const frames = new Frames();
  let setupReplies = 2; // HELLO's and CLIENT TRACKING's
  const socket = net.connect({ host, port: Number(port), noDelay: true }, () => socket.write(FEED_SETUP));
  socket.on('error', (err) => {
    console.error(`mux-floor: feed ${address}: ${err.message}`);
    process.exit(1);
  });
  socket.on('data', (chunk: Buffer) => {
    frames.each(chunk, (frame) => {
      if (setupReplies > 0) return void setupReplies--;
      let at = crAt(frame, 0) + 2;
      at += frameLength(frame, at); // "invalidate"
      if (frame[at] !== 42) return; // _: the node was flushed
      const eol = crAt(frame, at);
      let n = 0;
      for (let i = at + 1; i < eol; i++) n = n * 10 + frame[i] - 48;
      at = eol + 2;
      for (let k = 0; k < n; k++) {
        const len = frameLength(frame, at);
        const start = crAt(frame, at) + 2;
        const to = ownerInB(frame, start, at + len - 2, inA);
        // The versions hash itself (`floor:versions`, changed by every snapshot) is not a key to copy.
        if (to !== inA && !(versioned && frame[start] === 102 && frame.toString('latin1', start, start + 6) === 'floor:')) {
          const key = frame.subarray(at, at + len);
          if (versioned) batchSnapshot(inA, new Copy(null, 0, key, to));
          else inA.queuePart(Buffer.concat([DUMP_HEAD, key]), new Copy(null, 0, key, to), 1);
        }
        at += len;
      }
    });
    scheduleFlush();
  });
}
const FEED_SETUP = Buffer.from('*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*4\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\nON\r\n$5\r\nBCAST\r\n');

/** CLUSTER SLOTS from the seed, read once: the node serving each slot. */
async function loadSlots(seed: string): Promise<Node[]> {
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
  const owners = new Array<Node>(16384);
  for (const [, start, end, h, p] of ranges) {
    const address = `${h === '' ? host : h}:${p}`;
    let node = byAddress.get(address);
    if (node === undefined) byAddress.set(address, (node = new Node(address)));
    for (let slot = Number(start); slot <= Number(end); slot++) owners[slot] = node;
  }
  return owners;
}

async function main(): Promise<void> {
  if (clusterSeed !== null) {
    slotOwners = await loadSlots(clusterSeed);
    nodes = [...new Set(slotOwners)];
  } else nodes = nodeAddresses.map((a) => new Node(a));
  if (toRing !== null) ringAdded = new Node(toRing);
  if (toCluster !== null) targetSlots = await loadSlots(toCluster);
  if (versioned) for (const node of everyNode) for (const load of SCRIPT_LOADS) node.queuePart(load, { fill: () => undefined }, 0);
  if (carry === 'feed' && (ringAdded !== null || targetSlots !== null)) nodeAddresses.forEach((address, i) => openFeed(address, nodes[i]));
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
