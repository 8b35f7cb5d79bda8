// RESP3 end to end: after HELLO 3 a client gets RESP3 replies (maps, nulls, doubles) from
// back-end connections that speak RESP3, while RESP2 clients of the same proxy keep getting RESP2.

import net from 'node:net';
import { useProxy } from '../helpers/proxy';
import { HELLO_SERVER } from '../helpers/server-version';

const env = useProxy();

/** A raw client: send() writes a request and resolves with the reply bytes that arrive for it. */
class RawClient {
  private readonly socket: net.Socket;
  private buffered = '';
  private listener: ((d: string) => void) | null = null;
  private waiting: { until: (s: string) => boolean; resolve: (s: string) => void } | null = null;

  constructor(port: number) {
    this.socket = net.connect({ host: '127.0.0.1', port });
    this.socket.on('data', (d) => {
      if (this.listener !== null) return this.listener(d.toString('latin1'));
      this.buffered += d.toString('latin1');
      this.check();
    });
  }

  /** Sends `line` and resolves with everything received once it ends with `expectedEnd`. */
  send(line: string, until: (s: string) => boolean): Promise<string> {
    return new Promise((resolve) => {
      this.waiting = { until, resolve };
      this.socket.write(`${line}\r\n`);
      this.check();
    });
  }

  close(): void {
    this.socket.destroy();
  }

  /** Hands every chunk to `listener` (messages that arrive with no request), instead of buffering it. */
  onData(listener: ((d: string) => void) | null): void {
    this.listener = listener;
  }

  private check(): void {
    if (this.waiting !== null && this.waiting.until(this.buffered)) {
      const got = this.buffered;
      this.buffered = '';
      const w = this.waiting;
      this.waiting = null;
      w.resolve(got);
    }
  }
}

const exactly = (want: string) => (s: string) => s.length >= want.length;

describe('RESP3', () => {
  test('HELLO 3 answers a map with proto 3; forwarded replies are RESP3 for it and RESP2 for others', async () => {
    const port = env.proxy().address.port;
    const v3 = new RawClient(port);
    const v2 = new RawClient(port);
    try {
      const hello = await v3.send('HELLO 3', (s) => s.includes('modules') && s.endsWith('*0\r\n'));
      // `server` as the back end names itself (Valkey: valkey).
      expect(hello.startsWith(`%7\r\n$6\r\nserver\r\n$${HELLO_SERVER.server.length}\r\n${HELLO_SERVER.server}\r\n`)).toBe(true);
      expect(hello).toContain('$5\r\nproto\r\n:3\r\n');

      expect(await v2.send('HSET r3:h f v', exactly(':1\r\n'))).toBe(':1\r\n');
      expect(await v3.send('HGETALL r3:h', exactly('%1\r\n$1\r\nf\r\n$1\r\nv\r\n'))).toBe('%1\r\n$1\r\nf\r\n$1\r\nv\r\n');
      expect(await v2.send('HGETALL r3:h', exactly('*2\r\n$1\r\nf\r\n$1\r\nv\r\n'))).toBe('*2\r\n$1\r\nf\r\n$1\r\nv\r\n');

      expect(await v3.send('GET r3:missing', exactly('_\r\n'))).toBe('_\r\n');
      expect(await v2.send('GET r3:missing', exactly('$-1\r\n'))).toBe('$-1\r\n');

      expect(await v2.send('ZADD r3:z 1.5 m', exactly(':1\r\n'))).toBe(':1\r\n');
      expect(await v3.send('ZSCORE r3:z m', exactly(',1.5\r\n'))).toBe(',1.5\r\n');
      expect(await v2.send('ZSCORE r3:z m', exactly('$3\r\n1.5\r\n'))).toBe('$3\r\n1.5\r\n');

      // HELLO 2 switches back.
      await v3.send('HELLO 2', (s) => s.endsWith('*0\r\n'));
      expect(await v3.send('GET r3:missing', exactly('$-1\r\n'))).toBe('$-1\r\n');
    } finally {
      v3.close();
      v2.close();
    }
  });

  test('Pub/Sub in RESP3: confirmations and messages are push frames, other commands still run while subscribed', async () => {
    const port = env.proxy().address.port;
    const sub = new RawClient(port);
    const pub = new RawClient(port);
    try {
      await sub.send('HELLO 3', (s) => s.endsWith('*0\r\n'));
      const confirm = '>3\r\n$9\r\nsubscribe\r\n$4\r\nr3ch\r\n:1\r\n';
      expect(await sub.send('SUBSCRIBE r3ch', exactly(confirm))).toBe(confirm);
      const pconfirm = '>3\r\n$10\r\npsubscribe\r\n$3\r\nr3*\r\n:2\r\n';
      expect(await sub.send('PSUBSCRIBE r3*', exactly(pconfirm))).toBe(pconfirm);
      // A RESP3 client may run any command in subscribed mode; its replies are ordinary frames.
      expect(await sub.send('SET r3:sub v', exactly('+OK\r\n'))).toBe('+OK\r\n');
      expect(await sub.send('GET r3:sub', exactly('$1\r\nv\r\n'))).toBe('$1\r\nv\r\n');
      expect(await sub.send('PING', exactly('+PONG\r\n'))).toBe('+PONG\r\n');
      // A PUBLISH from a RESP2 client reaches it as push frames (one per matching subscription).
      const message = '>3\r\n$7\r\nmessage\r\n$4\r\nr3ch\r\n$5\r\nhello\r\n';
      const pmessage = '>4\r\n$8\r\npmessage\r\n$3\r\nr3*\r\n$4\r\nr3ch\r\n$5\r\nhello\r\n';
      const received = new Promise<string>((resolve) => {
        let got = '';
        sub.onData((d) => {
          got += d;
          if (got.length >= message.length + pmessage.length) resolve(got);
        });
      });
      // One subscriber by channel and by pattern: 2, as one Redis counts it (issue 12).
      expect(await pub.send('PUBLISH r3ch hello', exactly(':2\r\n'))).toBe(':2\r\n');
      const both = await received;
      expect([message + pmessage, pmessage + message]).toContain(both);
      sub.onData(null);
      const unsub = '>3\r\n$11\r\nunsubscribe\r\n$4\r\nr3ch\r\n:1\r\n';
      expect(await sub.send('UNSUBSCRIBE r3ch', exactly(unsub))).toBe(unsub);
      const punsub = '>3\r\n$12\r\npunsubscribe\r\n$3\r\nr3*\r\n:0\r\n';
      expect(await sub.send('PUNSUBSCRIBE', exactly(punsub))).toBe(punsub);
      const none = '>3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n';
      expect(await sub.send('UNSUBSCRIBE', exactly(none))).toBe(none);
    } finally {
      sub.close();
      pub.close();
    }
  });

  test('Pub/Sub in RESP3, pipelined: a keyspace subscription is confirmed first, in request order, as on one server', async () => {
    const sub = new RawClient(env.proxy().address.port);
    try {
      await sub.send('HELLO 3', (s) => s.endsWith('*0\r\n'));
      // The confirmation waits for every master; the commands after it still answer after it.
      const want = '>3\r\n$10\r\npsubscribe\r\n$16\r\n__keyevent@0__:*\r\n:1\r\n' + '_\r\n' + '+PONG\r\n' +
        '>3\r\n$9\r\nsubscribe\r\n$6\r\nr3:ord\r\n:2\r\n' + '_\r\n';
      expect(await sub.send('PSUBSCRIBE __keyevent@0__:*\r\nGET r3:none\r\nPING\r\nSUBSCRIBE r3:ord\r\nGET r3:none', exactly(want))).toBe(want);
    } finally {
      sub.close();
    }
  });

  test('blocking commands and transactions in RESP3 get RESP3 replies', async () => {
    const port = env.proxy().address.port;
    const c = new RawClient(port);
    const pusher = new RawClient(port);
    try {
      await c.send('HELLO 3', (s) => s.endsWith('*0\r\n'));
      // BLPOP on its own connection: a RESP3 timeout is `_`, not `*-1`.
      expect(await c.send('BLPOP r3:list 0.05', exactly('_\r\n'))).toBe('_\r\n');
      expect(await pusher.send('RPUSH r3:list a', exactly(':1\r\n'))).toBe(':1\r\n');
      const popped = '*2\r\n$7\r\nr3:list\r\n$1\r\na\r\n';
      expect(await c.send('BLPOP r3:list 1', exactly(popped))).toBe(popped);
      // MULTI/EXEC, and WATCH (a connection of its own): the EXEC reply holds a RESP3 map.
      expect(await pusher.send('HSET r3:{t}h f v', exactly(':1\r\n'))).toBe(':1\r\n');
      expect(await c.send('WATCH r3:{t}h', exactly('+OK\r\n'))).toBe('+OK\r\n');
      expect(await c.send('MULTI', exactly('+OK\r\n'))).toBe('+OK\r\n');
      expect(await c.send('HGETALL r3:{t}h', exactly('+QUEUED\r\n'))).toBe('+QUEUED\r\n');
      expect(await c.send('GET r3:{t}missing', exactly('+QUEUED\r\n'))).toBe('+QUEUED\r\n');
      const exec = '*2\r\n%1\r\n$1\r\nf\r\n$1\r\nv\r\n_\r\n';
      expect(await c.send('EXEC', exactly(exec))).toBe(exec);
    } finally {
      c.close();
      pusher.close();
    }
  });

  test('HELLO 4 is refused with NOPROTO; RESET goes back to RESP2', async () => {
    const port = env.proxy().address.port;
    const c = new RawClient(port);
    try {
      const want = '-NOPROTO unsupported protocol version\r\n';
      expect(await c.send('HELLO 4', exactly(want))).toBe(want);
      await c.send('HELLO 3', (s) => s.endsWith('*0\r\n'));
      expect(await c.send('RESET', exactly('+RESET\r\n'))).toBe('+RESET\r\n');
      expect(await c.send('GET r3:missing', exactly('$-1\r\n'))).toBe('$-1\r\n');
    } finally {
      c.close();
    }
  });
});
