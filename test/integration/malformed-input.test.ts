// SPEC section 1: bad input gets `-ERR Protocol error: ...` (Redis's text), that connection is
// closed, and nothing else is affected: other clients go on, the proxy stays usable and does not
// balloon. Also: inline commands, and requests that arrive in many small pieces.

import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import Redis from 'ioredis';
import { client, startProxy, useProxy } from '../helpers/proxy';
import { ProxyServer } from '../../proxy/server/server';

/** Longest wait for anything the proxy should do promptly. */
const GUARD_MS = 5_000;
const MiB = 1024 * 1024;
/** The main proxy's limit, small enough that a bulk over it is cheap to announce. */
const MAX_REQUEST_BYTES = MiB;
/** The main proxy's limits.maxArgs: set, as the default is Redis 7.0's own (INT_MAX). */
const MAX_ARGS = 100_000;

function withTimeout<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what()}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Polls a condition that has no event of its own (a counter), up to a deadline. */
async function eventually(check: () => boolean, what: () => string, ms = GUARD_MS): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms: ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Printable form of bytes for failure messages. */
function show(bytes: Buffer): string {
  const text = JSON.stringify(bytes.subarray(0, 300).toString('latin1'));
  return bytes.length > 300 ? `${text}... (${bytes.length} bytes)` : text;
}

interface CloseResult {
  /** Everything the proxy sent, as latin1 so that every byte is kept. */
  text: string;
  /** The proxy ended the stream (FIN) rather than the connection being reset. */
  ended: boolean;
  hadError: boolean;
}

/** Every raw connection made, so that a failed test does not leave one open. */
const openRawClients = new Set<RawClient>();

/** A plain TCP connection to the proxy that records everything it receives. */
class RawClient {
  private readonly chunks: Buffer[] = [];
  private receivedLength = 0;
  private ended = false;
  private closed = false;
  private hadError = false;
  private readonly onChange = new Set<() => void>();

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.chunks.push(chunk);
      this.receivedLength += chunk.length;
      this.notify();
    });
    socket.on('end', () => {
      this.ended = true;
      this.notify();
    });
    // EPIPE/ECONNRESET while still writing are possible once the proxy has closed; 'close' follows.
    socket.on('error', () => undefined);
    socket.on('close', (hadError: boolean) => {
      openRawClients.delete(this);
      this.closed = true;
      this.hadError = hadError;
      this.notify();
    });
  }

  static connect(port: number): Promise<RawClient> {
    return withTimeout(
      new Promise<RawClient>((resolve, reject) => {
        const socket = net.connect({ host: '127.0.0.1', port });
        socket.once('error', reject);
        socket.once('connect', () => {
          socket.off('error', reject);
          const raw = new RawClient(socket);
          openRawClients.add(raw);
          resolve(raw);
        });
      }),
      GUARD_MS,
      () => `connect to 127.0.0.1:${port}`,
    );
  }

  get received(): Buffer {
    return Buffer.concat(this.chunks, this.receivedLength);
  }

  /** Resolves once the bytes are handed to the kernel. */
  write(data: Buffer | string): Promise<void> {
    return new Promise((resolve) => {
      this.socket.write(data, () => resolve());
    });
  }

  /** Resolves with everything received once at least `n` bytes have arrived. */
  waitForBytes(n: number, ms = GUARD_MS): Promise<Buffer> {
    return this.waitFor(
      () => this.receivedLength >= n || this.closed,
      ms,
      () => `waiting for ${n} bytes, got ${show(this.received)}`,
    ).then(() => this.received);
  }

  /** Resolves once the connection is closed (by the proxy: this side never ends it). */
  waitForClose(ms = GUARD_MS): Promise<CloseResult> {
    return this.waitFor(
      () => this.closed,
      ms,
      () => `waiting for the proxy to close the connection; got ${show(this.received)}, ended: ${this.ended}`,
    ).then(() => ({ text: this.received.toString('latin1'), ended: this.ended, hadError: this.hadError }));
  }

  destroy(): void {
    this.socket.destroy();
  }

  private waitFor(done: () => boolean, ms: number, what: () => string): Promise<void> {
    if (done()) return Promise.resolve();
    let listener: (() => void) | undefined;
    const settled = new Promise<void>((resolve) => {
      listener = () => {
        if (done()) resolve();
      };
      this.onChange.add(listener);
    });
    return withTimeout(settled, ms, what).finally(() => {
      if (listener !== undefined) this.onChange.delete(listener);
    });
  }

  private notify(): void {
    for (const listener of [...this.onChange]) listener();
  }
}

/**
 * Another client with INCRs always in flight (a pipelined batch at a time) on its own key. Each
 * reply must be exactly one more than the one before it, and the key's final value must equal the
 * number of replies: a lost, doubled, misrouted or failed command shows.
 */
class Bystander {
  readonly values: number[] = [];
  readonly errors: unknown[] = [];
  private stopping = false;
  private readonly loop: Promise<void>;
  private readonly onBatch = new Set<() => void>();

  constructor(private readonly redis: Redis, readonly key: string, private readonly depth = 4) {
    this.loop = this.run();
  }

  /** Resolves once `n` more INCR replies have arrived than so far. */
  more(n: number): Promise<void> {
    const target = this.values.length + n;
    let listener: (() => void) | undefined;
    const reached = new Promise<void>((resolve, reject) => {
      listener = () => {
        if (this.errors.length > 0) reject(new Error(`the bystander failed: ${String(this.errors[0])}`));
        else if (this.values.length >= target) resolve();
      };
      this.onBatch.add(listener);
      listener();
    });
    return withTimeout(reached, GUARD_MS, () => `bystander at ${this.values.length} replies, waiting for ${target}`).finally(
      () => {
        if (listener !== undefined) this.onBatch.delete(listener);
      },
    );
  }

  /** Stops after the batch in flight; resolves with the number of INCR replies. */
  async stop(): Promise<number> {
    this.stopping = true;
    await withTimeout(this.loop, GUARD_MS, () => 'the bystander did not stop');
    return this.values.length;
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      try {
        const batch = await Promise.all(Array.from({ length: this.depth }, () => this.redis.incr(this.key)));
        this.values.push(...batch);
      } catch (err) {
        this.errors.push(err);
      }
      for (const listener of [...this.onBatch]) listener();
      if (this.errors.length > 0) return;
    }
  }
}

function oneTo(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i + 1);
}

/** A fresh ioredis client can still set and read a key through the proxy. */
async function expectUsable(proxy: ProxyServer, key: string): Promise<void> {
  const fresh = client(proxy);
  try {
    const value = `${key}:${Date.now()}`;
    expect(await fresh.set(key, value)).toBe('OK');
    expect(await fresh.get(key)).toBe(value);
  } finally {
    fresh.disconnect();
  }
}

/**
 * A full collection in this process (the proxy runs in it too), so that memory still held can be
 * told from garbage. V8 frees ArrayBuffer memory after the collection, off the main thread, so the
 * event loop gets a turn before memory is read.
 */
function gcFunction(): () => Promise<void> {
  v8.setFlagsFromString('--expose-gc');
  const gc: unknown = vm.runInNewContext('gc');
  if (typeof gc !== 'function') throw new Error('cannot get gc() through --expose-gc');
  return async () => {
    (gc as () => void)();
    await new Promise((resolve) => setImmediate(resolve));
  };
}

interface BadInput {
  name: string;
  input: Buffer;
  /** Redis's text after "Protocol error: ". */
  error: string;
}

const bad = (name: string, input: Buffer | string, error: string): BadInput => ({
  name,
  input: Buffer.isBuffer(input) ? input : Buffer.from(input, 'latin1'),
  error,
});

const BAD_INPUTS: BadInput[] = [
  // A negative count (`*-5`) is no error: Redis skips it (protocol-differential.test.ts checks that).
  bad('multibulk count below LLONG_MIN', '*-9223372036854775809\r\n', 'invalid multibulk length'),
  bad('non-numeric multibulk count', '*abc\r\n', 'invalid multibulk length'),
  bad('multibulk count over INT_MAX', '*2147483648\r\n', 'invalid multibulk length'),
  bad('multibulk count over limits.maxArgs', `*${MAX_ARGS + 1}\r\n`, 'invalid multibulk length'),
  bad('null bulk inside an array', '*2\r\n$3\r\nGET\r\n$-1\r\n', 'invalid bulk length'),
  bad('non-numeric bulk length', '*1\r\n$abc\r\n', 'invalid bulk length'),
  // Header only: the body is never sent, so the error must not wait for it.
  bad('bulk length over maxRequestBytes', `*3\r\n$3\r\nSET\r\n$7\r\nbig-key\r\n$${MAX_REQUEST_BYTES + 1}\r\n`, 'invalid bulk length'),
  bad('nested array', '*1\r\n*1\r\n$4\r\nPING\r\n', "expected '$', got '*'"),
  bad('integer inside an array', '*1\r\n:1\r\n', "expected '$', got ':'"),
  bad('70,000 bytes of inline text without a newline', Buffer.alloc(70_000, 'x'), 'too big inline request'),
  bad('unbalanced quotes in an inline command', 'SET "a b\r\n', 'unbalanced quotes in request'),
  // No NUL in it: Redis's strchr() stops at a NUL, so `*\0...` waits for more, as the line has no end.
  bad(
    'binary garbage after a star',
    Buffer.from([0x2a, 0xff, 0x80, 0x7f, 0x1b, 0xfe, 0x2a, 0x24, 0x0d, 0x0a, 0xde, 0xad, 0xbe, 0xef, 0x0d, 0x0a]),
    'invalid multibulk length',
  ),
];

describe('malformed client input', () => {
  const { cluster, proxy, connect } = useProxy({ limits: { maxRequestBytes: MAX_REQUEST_BYTES, maxArgs: MAX_ARGS } });
  let bystanderClient: Redis;
  let checker: Redis;

  beforeAll(() => {
    bystanderClient = connect();
    checker = connect();
  });

  afterEach(() => {
    for (const raw of openRawClients) raw.destroy();
    openRawClients.clear();
  });

  /** Starts a bystander on a fresh key, with replies already flowing. */
  async function startBystander(key: string): Promise<Bystander> {
    expect(await checker.del(key)).toBeGreaterThanOrEqual(0);
    const bystander = new Bystander(bystanderClient, key);
    await bystander.more(8);
    return bystander;
  }

  /** Stops the bystander and checks it saw every reply, in order, and no error. */
  async function checkBystander(bystander: Bystander): Promise<void> {
    await bystander.more(8); // still served after the bad connection is gone
    const n = await bystander.stop();
    expect(bystander.errors).toEqual([]);
    expect(bystander.values).toEqual(oneTo(n));
    expect(await checker.get(bystander.key)).toBe(String(n));
  }

  test.each(BAD_INPUTS)('$name: error reply, connection closed, nobody else affected', async ({ name, input, error }) => {
    const bystander = await startBystander(`bystander:${name}`);
    const errorsBefore = proxy().stats.protocolErrors;
    const clientsBefore = proxy().stats.connectedClients;

    const raw = await RawClient.connect(proxy().address.port);
    await raw.write(input);
    const result = await raw.waitForClose();

    expect(result.text).toBe(`-ERR Protocol error: ${error}\r\n`);
    expect(result.ended).toBe(true); // closed with a FIN after the reply, not reset
    expect(proxy().stats.protocolErrors).toBe(errorsBefore + 1);
    // The proxy's side of the connection is gone too, not left half-open.
    await eventually(
      () => proxy().stats.connectedClients === clientsBefore,
      () => `connectedClients is ${proxy().stats.connectedClients}, was ${clientsBefore} before`,
    );
    await checkBystander(bystander);
    await expectUsable(proxy(), `after:${name}`);
  });

  test('replies to good commands sent before the bad input come first, in order', async () => {
    const raw = await RawClient.connect(proxy().address.port);
    await raw.write('PING\r\n*1\r\n$4\r\nPING\r\n*abc\r\n');
    const result = await raw.waitForClose();
    expect(result).toEqual({
      text: '+PONG\r\n+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n',
      ended: true,
      hadError: false,
    });
  });

  test('replies from the nodes to earlier commands come before the locally made error', async () => {
    const key = 'order-before-error';
    expect(await checker.del(key)).toBeGreaterThanOrEqual(0);
    const incr = `*2\r\n$4\r\nINCR\r\n$${key.length}\r\n${key}\r\n`;
    const raw = await RawClient.connect(proxy().address.port);
    await raw.write(`${incr}${incr}PING\r\n${incr}*1\r\n$abc\r\n`);
    const result = await raw.waitForClose();
    expect(result.text).toBe(':1\r\n:2\r\n+PONG\r\n:3\r\n-ERR Protocol error: invalid bulk length\r\n');
    expect(result.ended).toBe(true);
    expect(await checker.get(key)).toBe('3');
  });

  test('commands after the bad input in the same packet are not run', async () => {
    const key = 'after-bad-input';
    expect(await checker.del(key)).toBeGreaterThanOrEqual(0);
    const raw = await RawClient.connect(proxy().address.port);
    await raw.write(`*1\r\n:1\r\nSET ${key} x\r\n*3\r\n$3\r\nSET\r\n$${key.length}\r\n${key}\r\n$1\r\ny\r\n`);
    const result = await raw.waitForClose();
    expect(result.text).toBe("-ERR Protocol error: expected '$', got ':'\r\n");
    expect(await checker.exists(key)).toBe(0);
  });

  test('200 connections sending bad input at once do not disturb a bystander', async () => {
    const bystander = await startBystander('bystander:200-bad-clients');
    const errorsBefore = proxy().stats.protocolErrors;
    const raws = await Promise.all(Array.from({ length: 200 }, () => RawClient.connect(proxy().address.port)));
    const results = await Promise.all(
      raws.map(async (raw, i) => {
        await raw.write(BAD_INPUTS[i % BAD_INPUTS.length].input);
        return raw.waitForClose(10_000);
      }),
    );
    expect(results.map((r) => r.text)).toEqual(
      raws.map((_, i) => `-ERR Protocol error: ${BAD_INPUTS[i % BAD_INPUTS.length].error}\r\n`),
    );
    expect(proxy().stats.protocolErrors).toBe(errorsBefore + 200);
    await checkBystander(bystander);
    await expectUsable(proxy(), 'after:200-bad-clients');
  });

  describe('inline commands', () => {
    test('PING', async () => {
      const raw = await RawClient.connect(proxy().address.port);
      try {
        await raw.write('PING\r\n');
        expect((await raw.waitForBytes(7)).toString('latin1')).toBe('+PONG\r\n');
      } finally {
        raw.destroy();
      }
    });

    test('SET then GET in one packet', async () => {
      expect(await checker.del('inline-key')).toBeGreaterThanOrEqual(0);
      const raw = await RawClient.connect(proxy().address.port);
      try {
        await raw.write('SET inline-key b\r\nGET inline-key\r\n');
        const expected = '+OK\r\n$1\r\nb\r\n';
        expect((await raw.waitForBytes(expected.length)).toString('latin1')).toBe(expected);
      } finally {
        raw.destroy();
      }
      expect(await checker.get('inline-key')).toBe('b');
    });

    test('requests split byte by byte over 1 ms timers', async () => {
      const key = 'split-key';
      expect(await checker.del(key)).toBeGreaterThanOrEqual(0);
      const requests =
        `*3\r\n$3\r\nSET\r\n$${key.length}\r\n${key}\r\n$5\r\nvalue\r\n` +
        `GET ${key}\r\n` +
        `*2\r\n$3\r\nGET\r\n$${key.length}\r\n${key}\r\n` +
        'PING\r\n';
      const expected = '+OK\r\n$5\r\nvalue\r\n$5\r\nvalue\r\n+PONG\r\n';
      const raw = await RawClient.connect(proxy().address.port);
      try {
        for (const byte of Buffer.from(requests, 'latin1')) {
          await raw.write(Buffer.from([byte]));
          await new Promise((resolve) => setTimeout(resolve, 1)); // the input's shape, not a wait
        }
        expect((await raw.waitForBytes(expected.length)).toString('latin1')).toBe(expected);
      } finally {
        raw.destroy();
      }
    });
  });

  describe('memory, with the default maxRequestBytes (64 MiB)', () => {
    let defaults: ProxyServer | undefined;
    const port = (): number => {
      if (defaults === undefined) throw new Error('the default-limits proxy did not start');
      return defaults.address.port;
    };

    beforeAll(async () => {
      defaults = await startProxy(cluster().seeds);
      expect(defaults.config.limits.maxRequestBytes).toBe(64 * MiB);
    }, 30_000);

    afterAll(async () => {
      await defaults?.close(500);
    });

    test('announcing a 100 MB bulk is refused at once, without the body', async () => {
      const raw = await RawClient.connect(port());
      await raw.write(`*3\r\n$3\r\nSET\r\n$8\r\nhuge-key\r\n$${100 * 1000 * 1000}\r\n`);
      const result = await raw.waitForClose();
      expect(result).toEqual({ text: '-ERR Protocol error: invalid bulk length\r\n', ended: true, hadError: false });
      expect(await checker.exists('huge-key')).toBe(0);
    });

    test('a 50 MB bulk abandoned after 1 MB leaves no memory held', async () => {
      const gc = gcFunction();
      const connections = 8;
      const body = Buffer.alloc(MiB, 'm');
      const header = `*3\r\n$3\r\nSET\r\n$9\r\nhalf-sent\r\n$${50 * 1000 * 1000}\r\n`;
      const stats = (defaults as ProxyServer).stats;
      const clientsBefore = stats.connectedClients;
      await gc();
      await gc();
      const before = process.memoryUsage();

      const raws = await Promise.all(Array.from({ length: connections }, () => RawClient.connect(port())));
      await Promise.all(raws.map(async (raw) => {
        await raw.write(header);
        await raw.write(body);
      }));
      // The proxy holds what it has read (about 1 MB a connection), not the 50 MB announced.
      await eventually(
        () => process.memoryUsage().arrayBuffers - before.arrayBuffers >= connections * MiB * 0.75,
        () => `the proxy never held the ${connections} MiB sent (arrayBuffers +${process.memoryUsage().arrayBuffers - before.arrayBuffers})`,
      );
      const during = process.memoryUsage();
      expect(during.arrayBuffers - before.arrayBuffers).toBeLessThan(connections * 4 * MiB);
      expect(raws.map((raw) => raw.received.length)).toEqual(raws.map(() => 0)); // no reply to half a request

      for (const raw of raws) raw.destroy();
      await eventually(
        () => stats.connectedClients === clientsBefore,
        () => `connectedClients is ${stats.connectedClients}, was ${clientsBefore} before`,
      );
      // What the proxy read must become garbage: collect until it is freed, or fail at the deadline.
      const heldAfterClose = async (): Promise<number> => {
        await gc();
        return process.memoryUsage().arrayBuffers - before.arrayBuffers;
      };
      const deadline = Date.now() + GUARD_MS;
      let held = await heldAfterClose();
      while (held >= 2 * MiB && Date.now() < deadline) held = await heldAfterClose();
      expect(held).toBeLessThan(2 * MiB);
      expect(process.memoryUsage().rss - before.rss).toBeLessThan(60 * MiB);
      await expectUsable(defaults as ProxyServer, 'after:half-sent');
    });
  });
});
