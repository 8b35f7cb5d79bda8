// MONITOR through slotproxy (issue 38, item 3), in front of a 3-master Redis Cluster, compared with
// MONITOR on one Redis (a single-node cluster owning every slot): the same requests sent to both
// give the same lines, once the time and the client's port are masked, and the monitor's own
// connection answers as Redis answers a monitor.

import net from 'node:net';
import { once } from 'node:events';
import { useProxy } from '../helpers/proxy';
import { useReferenceNode } from '../helpers/reference-node';
import { ReplyFramer } from '../../proxy/resp/reply-framer';
import { encodeRequest } from '../helpers/raw-exchange';
import { waitFor } from '../helpers/master-keys';

const h = useProxy();
const ref = useReferenceNode();

const WAIT_MS = 10_000;

/** A raw connection: requests written as given, every reply frame kept in arrival order. */
class RawClient {
  readonly frames: string[] = [];
  private readonly framer = new ReplyFramer();
  private waiter: (() => void) | null = null;
  closed = false;

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.framer.push(chunk, (frame) => this.frames.push(frame.toString('latin1')));
      this.waiter?.();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      this.waiter?.();
    });
  }

  static async open(port: number): Promise<RawClient> {
    const socket = net.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    return new RawClient(socket);
  }

  /** `ip:port` of this end, as the server names the client. */
  get addr(): string {
    return `${this.socket.localAddress}:${this.socket.localPort}`;
  }

  /** Waits until `n` frames have arrived in all. */
  async waitFrames(n: number): Promise<string[]> {
    const deadline = Date.now() + WAIT_MS;
    while (this.frames.length < n) {
      if (this.closed) throw new Error(`closed after ${JSON.stringify(this.frames)}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`waited for ${n} frames, got ${JSON.stringify(this.frames)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return this.frames.slice(0, n);
  }

  /** Sends one request and waits for its reply. */
  async call(args: readonly string[]): Promise<string> {
    const before = this.frames.length;
    this.socket.write(encodeRequest(args));
    return (await this.waitFrames(before + 1))[before];
  }

  close(): void {
    this.socket.destroy();
  }
}

const opened: RawClient[] = [];
async function open(port: number): Promise<RawClient> {
  const c = await RawClient.open(port);
  opened.push(c);
  return c;
}
afterEach(() => {
  for (const c of opened.splice(0)) c.close();
});

const LINE = /^\+(\d+)\.(\d{6}) \[0 ([^\]]+)\] (.*)\r\n$/s;

/** A monitor line with its time checked and masked, and the driver's address named. */
function masked(line: string, driver: RawClient): string {
  const m = LINE.exec(line);
  if (m === null) return `not a monitor line: ${JSON.stringify(line)}`;
  const seconds = Number(`${m[1]}.${m[2]}`);
  if (Math.abs(seconds - Date.now() / 1000) > 60) return `a time far from now: ${line}`;
  const who = m[3] === driver.addr ? 'DRIVER' : m[3] === 'lua' ? 'lua' : `other ${m[3]}`;
  return `[0 ${who}] ${m[4]}`;
}

/** Requests whose lines are compared, each sent after the previous one's reply. */
const SEQUENCE: string[][] = [
  ['set', '{t}k', 'v'],
  ['SET', '{t}k2', 'a"b\\c\n\r\t\x07\x08\x00\x7f\x01 é'],
  ['GET', '{t}k'],
  ['AUTH', 'secret'],
  ['AUTH', 'someone', 'secret'],
  ['HELLO', '3', 'AUTH', 'someone', 'secret', 'SETNAME', 'n'],
  ['HELLO', '2'],
  ['MULTI'],
  ['SET', '{t}a', '1'],
  ['GET', '{t}a'],
  ['EXEC'],
  ['MULTI'],
  ['SET', '{t}a', '2'],
  ['DISCARD'],
  ['MULTI'],
  ['NOSUCH'],
  ['EXEC'],
  ['EVAL', 'return 1', '0'],
  ['CONFIG', 'GET', 'maxmemory'], // admin: not shown
  ['GET'], // arity: not shown
  ['NOSUCH', 'x'], // unknown: not shown
  ['MSET', 'a', '1', 'b', '2'], // CROSSSLOT, refused before it runs: not shown
  ['PING'],
  ['MIGRATE', '127.0.0.1', '1', '{t}k', '0', '10', 'AUTH', 'secret'],
  ['MIGRATE', '127.0.0.1', '1', '', '0', '10', 'AUTH2', 'someone', 'secret', 'KEYS', '{t}k'],
  ['CLIENT', 'SETNAME', 'x'],
  ['DEL', '{t}k', '{t}k2', '{t}a'],
];

/** The sequence on `port` with a monitor attached: the driver's replies and the monitor's lines. */
async function monitored(port: number): Promise<{ replies: string[]; lines: string[] }> {
  const monitor = await open(port);
  expect(await monitor.call(['MONITOR'])).toBe('+OK\r\n');
  const driver = await open(port);
  const replies: string[] = [];
  for (const args of SEQUENCE) replies.push(await driver.call(args));
  // The marker's line is the last: every line before it has arrived.
  await driver.call(['ECHO', 'end-of-sequence']);
  const deadline = Date.now() + WAIT_MS;
  while (!monitor.frames.some((f) => f.includes('"end-of-sequence"')) && Date.now() < deadline) {
    await monitor.waitFrames(monitor.frames.length + 1).catch(() => undefined);
  }
  const lines = monitor.frames.slice(1).map((l) => masked(l, driver));
  return { replies, lines };
}

test('the same requests give the same lines as on one Redis: quoting, redaction, MULTI/EXEC, what is not shown', async () => {
  const want = await monitored(ref.node().port);
  const got = await monitored(h.proxy().address.port);
  // The commands a script runs show on the node as `[0 lua]` lines; the proxy never sees them.
  const wantLines = want.lines.filter((l) => !l.startsWith('[0 lua]'));
  expect(got.lines).toEqual(wantLines);
  expect(got.lines).toContain('[0 DRIVER] "SET" "{t}k2" "a\\"b\\\\c\\n\\r\\t\\a\\b\\x00\\x7f\\x01 \\xc3\\xa9"');
  expect(got.lines).toContain('[0 DRIVER] "HELLO" "3" "AUTH" "(redacted)" "(redacted)" "SETNAME" "n"');
  // The driver's replies are one Redis's too, but for MIGRATE's (the nodes' ports differ) and
  // HELLO's (server details).
  const comparable = (r: string[]): string[] => r.filter((_, i) => !['MIGRATE', 'HELLO'].includes(SEQUENCE[i][0]));
  expect(comparable(got.replies)).toEqual(comparable(want.replies));
});

test('the monitor\'s own connection: no keyspace, its commands shown, MONITOR again silent, RESET ends it', async () => {
  const run = async (port: number): Promise<string[]> => {
    const monitor = await open(port);
    const out: string[] = [await monitor.call(['MONITOR'])];
    // PING's reply, then its own line.
    monitor.socket.write(encodeRequest(['PING']));
    out.push(...(await monitor.waitFrames(3)).slice(1).map((f) => f.replace(LINE, (_, s, u, who, rest) => `+TIME [0 ${who === monitor.addr ? 'SELF' : who}] ${rest}\r\n`)));
    for (const args of [['GET', 'k'], ['SET', 'k', 'v']]) out.push(await monitor.call(args));
    monitor.socket.write(encodeRequest(['MONITOR'])); // no reply: RESET's is the next
    for (const args of [['RESET'], ['SET', '{t}m', 'v'], ['GET', '{t}m'], ['DEL', '{t}m']]) out.push(await monitor.call(args));
    return out;
  };
  const want = await run(ref.node().port);
  const got = await run(h.proxy().address.port);
  expect(got).toEqual(want);
  expect(got).toEqual([
    '+OK\r\n',
    '+PONG\r\n',
    '+TIME [0 SELF] "PING"\r\n',
    "-ERR Replica can't interact with the keyspace\r\n",
    "-ERR Replica can't interact with the keyspace\r\n",
    '+RESET\r\n', // MONITOR again has no reply
    '+OK\r\n',
    '$1\r\nv\r\n',
    ':1\r\n',
  ]);
});

test('every client\'s commands reach every monitor; monitors that leave are dropped', async () => {
  const port = h.proxy().address.port;
  const [m1, m2] = [await open(port), await open(port)];
  expect(await m1.call(['MONITOR'])).toBe('+OK\r\n');
  expect(await m2.call(['MONITOR'])).toBe('+OK\r\n');
  const clients = await Promise.all([open(port), open(port), open(port)]);
  await Promise.all(clients.map((c, i) => c.call(['SET', `from:${i}`, String(i)])));
  for (const m of [m1, m2]) {
    const lines = (await m.waitFrames(4)).slice(1).map((l) => LINE.exec(l)?.slice(3, 5) ?? l);
    expect(lines.sort()).toEqual(clients.map((c, i) => [c.addr, `"SET" "from:${i}" "${i}"`]).sort());
  }
  const info = String(await clients[0].call(['CLIENT', 'LIST']));
  expect(info.split('\n').filter((l) => / flags=O /.test(l)).length).toBe(2);
  m1.close();
  m2.close();
  // Gone monitors leave the feed: no client in monitor mode, nothing more fed.
  await waitFor('the monitors to leave', async () => !/ flags=O /.test(String(await clients[0].call(['CLIENT', 'LIST']))));
});
