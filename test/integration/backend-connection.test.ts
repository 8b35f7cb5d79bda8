// A shared back-end connection against a real redis-server: requests are copied into one output
// buffer that is reused between writes (proxy/backend/connection.ts, OutputBuffer). These check
// that no request's bytes are ever overwritten or reordered: small and large requests mixed in one
// event-loop turn, and bursts the kernel cannot take at once (the buffer then stays the socket's).
// And that a connection replacing a lost one writes no request before the node answered once
// (proveFirst), against a TCP peer that resets like a dying redis-server's listener.
import * as net from 'node:net';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { BackendConnection } from '../../proxy/backend/connection';
import { BackendPool } from '../../proxy/backend/pool';
import { request } from '../../proxy/backend/request';
import { decodeReply } from '../../proxy/resp/decode-reply';
import { command } from '../../proxy/resp/encode';

let nodes: StandaloneNodes;
let conn: BackendConnection | null = null;

beforeAll(async () => {
  nodes = await StandaloneNodes.start(1);
});

afterEach(() => conn?.close());

afterAll(async () => {
  await nodes.stop();
});

function connect(address = nodes.addresses[0], proveFirst = false): BackendConnection {
  conn = new BackendConnection(address, { connectTimeoutMs: 2000, commandTimeoutMs: 10_000, delayMs: 0, handshake: [], tls: null, proveFirst });
  return conn;
}

/** A value of `size` bytes that differs per key, so a reordered or overwritten request shows. */
const valueOf = (key: string, size: number): string => `${key}:`.repeat(Math.ceil(size / (key.length + 1))).slice(0, size);

describe('one output buffer per back-end connection', () => {
  test('small and large requests sent in one turn reach the node whole and in order', async () => {
    const c = connect();
    // Sizes on both sides of the 64 KiB copy limit, interleaved.
    const sizes = [10, 70_000, 32, 200_000, 5, 65_536, 65_535, 1, 1_000_000, 40];
    const keys = sizes.map((size, i) => `mixed:${i}:${size}`);
    const sets = keys.map((k, i) => request(c, ['SET', k, valueOf(k, sizes[i])]));
    expect((await Promise.all(sets)).map((f) => f.toString())).toEqual(keys.map(() => '+OK\r\n'));
    const gets = await Promise.all(keys.map((k) => request(c, ['GET', k])));
    gets.forEach((frame, i) => expect(String(decodeReply(frame, false))).toBe(valueOf(keys[i], sizes[i])));
  });

  test('bursts the kernel cannot take at once, then more requests while they drain: nothing overwritten', async () => {
    const c = connect();
    expect((await request(c, ['PING'])).toString()).toBe('+PONG\r\n');
    const pid = nodes.nodes[0].pid as number;
    // A stopped node reads nothing: the socket's buffers fill and writes stay queued in Node.
    process.kill(pid, 'SIGSTOP');
    const pending: Promise<Buffer>[] = [];
    const keys: string[] = [];
    try {
      await burst(c, pending, keys);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect((await Promise.all(pending)).every((f) => f.toString() === '+OK\r\n')).toBe(true);
    const values = await Promise.all(keys.map((k) => request(c, ['GET', k])));
    values.forEach((frame, i) => expect(String(decodeReply(frame, false))).toBe(valueOf(keys[i], 8192)));
  });
});

/** 40 turns of 100 SETs of 8 KiB: 800 KiB a turn (under the copy and keep limits), 32 MiB in all, more than the sockets buffer. */
async function burst(c: BackendConnection, pending: Promise<Buffer>[], keys: string[]): Promise<void> {
    for (let turn = 0; turn < 40; turn++) {
      for (let i = 0; i < 100; i++) {
        const k = `burst:${turn}:${i}`;
        keys.push(k);
        pending.push(request(c, ['SET', k, valueOf(k, 8192)]));
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
}

/**
 * A peer that keeps what it reads and, when the first bytes of a connection arrive, resets it (as
 * a killed redis-server's listener can) or, for the connections `closes` names by order, closes it.
 */
async function resettingPeer(closes: (n: number) => boolean = () => false): Promise<{ address: string; received: string[]; close: () => Promise<void> }> {
  const received: string[] = [];
  let accepted = 0;
  const server = net.createServer((socket) => {
    const n = accepted++;
    socket.once('data', (data) => {
      received.push(data.toString());
      if (closes(n)) socket.destroy();
      else socket.resetAndDestroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return { address, received, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** Sends SET on `c` to a peer that never answers, and says whether its failure counted it as written. */
function setWritten(c: BackendConnection): Promise<boolean> {
  return new Promise((resolve, reject) => {
    c.send({
      payload: command(['SET', 'k', 'v']),
      onReply: () => reject(new Error('the peer answered')),
      onFailure: (_message, written) => resolve(written),
    });
  });
}

describe('a node whose connection was lost is proven before requests are written (proveFirst)', () => {
  test('a connection reset after connect: with proveFirst only PING went out and the SET counts as not written', async () => {
    const peer = await resettingPeer();
    try {
      expect(await setWritten(connect(peer.address, true))).toBe(false);
      expect(peer.received.join('')).toBe('*1\r\n$4\r\nPING\r\n');
      // Without it the SET is on the wire when the reset comes: it may have run.
      expect(await setWritten(connect(peer.address, false))).toBe(true);
      expect(peer.received[1]).toContain('SET');
    } finally {
      await peer.close();
    }
  });

  test('the pool proves a node whose connection closed: the next request on a resetting listener counts as not written', async () => {
    // The first connection is closed by the peer once it reads (a node going away); the next is reset.
    const peer = await resettingPeer((n) => n === 0);
    const pool = new BackendPool({ connectionsPerNode: 1, connectTimeoutMs: 2000, commandTimeoutMs: 10_000, handshake: [], tls: null });
    try {
      expect(await setWritten(pool.connection(peer.address, 0))).toBe(true); // on the wire when the connection closed: it may have run
      expect(await setWritten(pool.connection(peer.address, 0))).toBe(false);
      expect(peer.received[1]).toBe('*1\r\n$4\r\nPING\r\n');
    } finally {
      pool.closeAll();
      await peer.close();
    }
  });

  test('a live node answers the probe and then the request, with no extra reply', async () => {
    const c = connect(nodes.addresses[0], true);
    const replies = await Promise.all([request(c, ['SET', 'proven', 'yes']), request(c, ['GET', 'proven'])]);
    expect(replies.map((f) => f.toString())).toEqual(['+OK\r\n', '$3\r\nyes\r\n']);
  });
});
