// RESP3 end to end: after HELLO 3 a client gets RESP3 replies (maps, nulls, doubles) from
// back-end connections that speak RESP3, while RESP2 clients of the same proxy keep getting RESP2.

import net from 'node:net';
import { useProxy } from '../helpers/proxy';

const env = useProxy();

/** A raw client: send() writes a request and resolves with the reply bytes that arrive for it. */
class RawClient {
  private readonly socket: net.Socket;
  private buffered = '';
  private waiting: { until: (s: string) => boolean; resolve: (s: string) => void } | null = null;

  constructor(port: number) {
    this.socket = net.connect({ host: '127.0.0.1', port });
    this.socket.on('data', (d) => {
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
      expect(hello.startsWith('%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n')).toBe(true);
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

  test('HELLO 4 is refused with NOPROTO; RESET goes back to RESP2', async () => {
    const port = env.proxy().address.port;
    const c = new RawClient(port);
    try {
      const want = '-NOPROTO sorry, this protocol version is not supported.\r\n';
      expect(await c.send('HELLO 4', exactly(want))).toBe(want);
      await c.send('HELLO 3', (s) => s.endsWith('*0\r\n'));
      expect(await c.send('RESET', exactly('+RESET\r\n'))).toBe('+RESET\r\n');
      expect(await c.send('GET r3:missing', exactly('$-1\r\n'))).toBe('$-1\r\n');
    } finally {
      c.close();
    }
  });
});
