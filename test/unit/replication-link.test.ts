// replication/link.ts against a fake master: the bytes between a full sync's snapshot and its stream.
// Redis 7.4 frees a replica whose diskless transfer was complete but whose RDB child it had not
// reaped yet when a FLUSHALL killed that child, and the replicationCron of that same serverCron tick
// still counts it pre-sync and writes it its keep-alive "\n" after the snapshot's EOF mark.
import net from 'node:net';
import { AddressInfo } from 'node:net';
import { ReplicationLink } from '../../proxy/replication/link';

const MARK = 'a'.repeat(40);
const PING = '*1\r\n$4\r\nPING\r\n';

/** A master answering the handshake, then `FULLRESYNC <id> 42` and `after` (snapshot and what follows) in one write. */
async function fakeMaster(after: string): Promise<{ port: number; close: () => void }> {
  const server = net.createServer((socket) => {
    let seen = '';
    let answered = 0;
    socket.on('data', (d) => {
      seen += d.toString('latin1');
      // The name of every command received so far (the link sends only arrays of bulk strings).
      const names = [...seen.matchAll(/\*\d+\r\n\$\d+\r\n(\w+)\r\n/g)].map((m) => m[1].toUpperCase());
      for (; answered < names.length; answered++) {
        const name = names[answered];
        if (name === 'PING') socket.write('+PONG\r\n');
        else if (name === 'REPLCONF') socket.write('+OK\r\n');
        else if (name === 'PSYNC') socket.write(`+FULLRESYNC ${'f'.repeat(40)} 42\r\n\n\n$EOF:${MARK}\r\n${after}`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, close: () => server.close() };
}

/** The stream bytes (with their first offset) and snapshot the link hands on, until it has `want` stream bytes or is lost. */
function follow(port: number, want: number): Promise<{ snapshot: string; stream: string; first: number; lost: string | null }> {
  return new Promise((resolve) => {
    const got = { snapshot: '', stream: '', first: -1, lost: null as string | null };
    const link: ReplicationLink = new ReplicationLink(`127.0.0.1:${port}`, { tls: null, handshake: [], connectTimeoutMs: 2000, announcePort: 0, resume: null }, {
      fullSync: () => undefined,
      snapshotBytes: (chunk) => void (got.snapshot += chunk.toString('latin1')),
      snapshotEnd: () => undefined,
      continued: () => undefined,
      streamBytes: (chunk, first) => {
        if (got.first < 0) got.first = first;
        got.stream += chunk.toString('latin1');
        if (got.stream.length >= want) link.close('enough');
      },
      lost: (reason) => resolve({ ...got, lost: reason === 'enough' ? null : reason }),
    });
  });
}

test('keep-alive newlines after the snapshot are not stream bytes: the stream starts at the offset after FULLRESYNC\'s', async () => {
  const master = await fakeMaster(`REDIS0011-snapshot${MARK}\n\n${PING}${PING}`);
  try {
    const got = await follow(master.port, 2 * PING.length);
    expect(got.lost).toBeNull();
    expect(got.snapshot).toBe('REDIS0011-snapshot');
    expect(got.first).toBe(43);
    expect(got.stream).toBe(PING + PING);
  } finally {
    master.close();
  }
});

test('a newline inside the stream is handed on as it is (the stream reader judges it)', async () => {
  const master = await fakeMaster(`REDIS0011-snapshot${MARK}${PING}\n${PING}`);
  try {
    const got = await follow(master.port, 2 * PING.length + 1);
    expect(got.first).toBe(43);
    expect(got.stream).toBe(`${PING}\n${PING}`);
  } finally {
    master.close();
  }
});

test('after a full sync the link acknowledges until the stream comes: a master that starts it only on a later ACK is not left holding it', async () => {
  // As a Redis master with a diskless sync: an ACK before it has put the replica online starts nothing.
  let acks = 0;
  const server = net.createServer((socket) => {
    let seen = '';
    let answered = 0;
    socket.on('data', (d) => {
      seen += d.toString('latin1');
      const names = [...seen.matchAll(/\*\d+\r\n\$\d+\r\n(\w+)\r\n(?:\$\d+\r\n(\w+)\r\n)?/g)].map((m) => `${m[1]} ${m[2] ?? ''}`.toUpperCase());
      for (; answered < names.length; answered++) {
        const name = names[answered];
        if (name.startsWith('REPLCONF ACK')) {
          if (++acks === 3) socket.write(PING);
        } else if (name.startsWith('PING')) socket.write('+PONG\r\n');
        else if (name.startsWith('REPLCONF')) socket.write('+OK\r\n');
        else if (name.startsWith('PSYNC')) socket.write(`+FULLRESYNC ${'f'.repeat(40)} 42\r\n$EOF:${MARK}\r\nREDIS0011-snapshot${MARK}`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const stream = await new Promise<string>((resolve, reject) => {
      const link: ReplicationLink = new ReplicationLink(`127.0.0.1:${(server.address() as AddressInfo).port}`, { tls: null, handshake: [], connectTimeoutMs: 2000, announcePort: 0, resume: null }, {
        fullSync: () => undefined,
        snapshotBytes: () => undefined,
        snapshotEnd: () => link.ackUntilStream(() => 0),
        continued: () => undefined,
        streamBytes: (chunk) => {
          resolve(chunk.toString('latin1'));
          link.close('enough');
        },
        lost: (reason) => (reason === 'enough' ? undefined : reject(new Error(reason))),
      });
    });
    expect(stream).toBe(PING);
    expect(acks).toBeGreaterThanOrEqual(3);
  } finally {
    server.close();
  }
});
