// SPEC section 1 against the real thing: request-decoding corners (issue 12, items 3 and 4) sent as
// exact bytes over raw sockets to a reference (a single-node Redis Cluster owning every slot: what a
// client of one Redis sees) and to slotproxy in front of 3 masters, whole and in 1- and 8-byte writes.
// The reply bytes and whether the connection was closed must be the same, byte for byte.
//
// How a case ends, without sleeping:
// - A case Redis closes on ends at the very byte Redis decides on (the CR of a bad line, the 65,537th
//   byte of a line with no end). Nothing is sent after it, so the close is a clean FIN and no later
//   byte can change the outcome (a CR arriving with the 65,537th byte would end the line instead).
//   The exchange ends at 'close'.
// - A case Redis keeps open is followed by a sentinel request; the exchange ends at its reply.
// Small writes give the event loop a turn between writes, so a close is seen before the next write.

import net from 'node:net';
import { useCluster } from '../helpers/cluster';
import { startProxy, useProxy } from '../helpers/proxy';
import { ProxyServer } from '../../proxy/server/server';

/** Longest wait for the outcome once the last byte is written. */
const OUTCOME_MS = 10_000;
/** Longest time to write one case (65,537 one-byte writes on a busy machine). */
const WRITE_MS = 60_000;
const INLINE_MAX = 64 * 1024;
const PASSWORD = 'decoder-pw';

const SENTINEL = Buffer.from('ECHO sentinel-7f3a\r\n');
const SENTINEL_REPLY = Buffer.from('$13\r\nsentinel-7f3a\r\n');
/** With requirepass: authenticated first, so the reply is the same whatever the case did. */
const AUTH_SENTINEL = Buffer.concat([Buffer.from(`AUTH ${PASSWORD}\r\n`), SENTINEL]);

interface Case {
  name: string;
  bytes: Buffer;
  /** Redis closes the connection on these bytes (no sentinel follows them). */
  closes: boolean;
}

const bytes = (s: string): Buffer => Buffer.from(s, 'latin1');
const open = (name: string, input: string | Buffer): Case => ({ name, bytes: Buffer.isBuffer(input) ? input : bytes(input), closes: false });
const closes = (name: string, input: string | Buffer): Case => ({ name, bytes: Buffer.isBuffer(input) ? input : bytes(input), closes: true });

/** `head`, then 'payload' over and over, exactly `total` bytes: more than 64 KiB and no line end. */
function padded(head: string, total = INLINE_MAX + 1): Buffer {
  const out = Buffer.alloc(total, 'payload');
  out.write(head, 0, 'latin1');
  return out;
}

function multibulk(...args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a, 'latin1')}\r\n${a}\r\n`).join('')}`;
}

const CASES: Case[] = [
  // Multibulk counts: <= 0 is skipped, past INT_MAX (or not string2ll's number) is an error.
  open('*0 then PING', '*0\r\nPING\r\n'),
  open('*-10 then PING', '*-10\r\nPING\r\n'),
  open('*-1', '*-1\r\n'),
  open('*LLONG_MIN is a number, so skipped', '*-9223372036854775808\r\n'),
  open('*0, *-1 and a multibulk PING', `*0\r\n*-1\r\n${multibulk('PING')}`),
  closes('*LLONG_MIN-1', '*-9223372036854775809\r\n'),
  closes('*-0', '*-0\r\n'),
  closes('*+1', '*+1\r\n'),
  closes('*01', '*01\r\n'),
  closes('* with no number', '*\r\n'),
  closes('*abc', '*abc\r\n'),
  closes('*1.5', '*1.5\r\n'),
  closes('*1 with a trailing space', '*1 \r\n'),
  closes('*INT_MAX+1', '*2147483648\r\n'),
  closes('*LLONG_MAX', '*9223372036854775807\r\n'),
  closes('*20 digits', '*99999999999999999999\r\n'),
  closes('*INT_MAX is accepted (then a non-$ shows it)', '*2147483647\r\n:\r\n'),
  closes('*1048577 (over 1024*1024) is accepted', `*1048577\r\n$4\r\nPING\r\n:\r\n`),
  closes('* line ended by the CR of the next line', '*1\n$4\r\n'),
  closes('binary junk after *', '*\xff\x80\x7f\x1b\xfe*$\r\n'),
  // Bulk lengths.
  closes('$-1', '*1\r\n$-1\r\n'),
  closes('$-0', '*1\r\n$-0\r\n'),
  closes('$abc', '*1\r\n$abc\r\n'),
  closes('$ with no number', '*1\r\n$\r\n'),
  closes('$04', '*1\r\n$04\r\n'),
  closes('$ over proto-max-bulk-len (512 MB)', '*1\r\n$536870913\r\n'),
  closes('$20 digits', '*1\r\n$99999999999999999999\r\n'),
  closes('$ line ended by a later CR', '*1\r\n$4\nPING\r\n'),
  open('ECHO hello', multibulk('ECHO', 'hello')),
  open('ECHO of an empty bulk', multibulk('ECHO', '')),
  open('the two bytes after a bulk are not checked', '*2\r\n$4\r\nECHO\r\n$1\r\nkXY'),
  // Not a bulk inside an array: Redis waits for the line's CR, then names the byte.
  closes("nested array: got '*'", '*1\r\n*1\r\n'),
  closes("integer: got ':'", '*1\r\n:1\r\n'),
  closes("simple string second: got '+'", '*2\r\n$4\r\nECHO\r\n+x\r\n'),
  closes("inline text: got 'P'", '*1\r\nPING\r\n'),
  closes('a CR where $ is due is written as a space', '*1\r\n\r\n'),
  closes('an LF where $ is due is written as a space', '*1\r\n\n\r\n'),
  closes('a space where $ is due', '*1\r\n \r\n'),
  closes('byte 0xff where $ is due, echoed raw', '*1\r\n\xff\r\n'),
  // Inline lines.
  open('inline PING CRLF', 'PING\r\n'),
  open('inline PING bare LF', 'PING\n'),
  open('inline PING CR CR LF', 'PING\r\r\n'),
  open('empty inline lines are skipped', '\r\n\n   \t\r\nPING\r\n'),
  open('inline quoting', 'ECHO "a\\tb\\x41\\"\'"\r\n'),
  open("inline 'single' quotes", "ECHO 'it\\'s \\n'\r\n"),
  open('inline \\v inside a word', 'ECHO a\x0bb\r\n'),
  open('a $ line outside a multibulk is an inline command', '$4\r\n'),
  open('binary junk inline: an unknown command echoed raw', '\xff\xfe\x80 \x01\x1b\r\n'),
  open('unknown command cut at a NUL, CR/LF in its args as spaces', `*3\r\n$5\r\nab\x00cd\r\n$4\r\na\r\nb\r\n$2\r\n\x00x\r\n`),
  open('inline line just under 64 KiB', `ECHO ${'x'.repeat(INLINE_MAX - 6)}\n`),
  closes('unbalanced double quote', 'ECHO "abc\r\n'),
  closes('unbalanced single quote', "ECHO 'abc\r\n"),
  closes('closing quote followed by a letter', 'ECHO "a"b\r\n'),
  closes('escaped closing quote leaves it open', 'ECHO "abc\\"\r\n'),
  // Lines that never end (issue 12 item 3): 64 KiB + 1 held, whatever the first byte.
  closes('NUL then payload...: too big inline request', padded('\x00')),
  closes('*NUL then payload...: too big mbulk count string', padded('*\x00')),
  closes('$NUL then payload... (inline): too big inline request', padded('$\x00')),
  closes('a NUL hides the LF after it', padded('PING\x00\r\n')),
  closes('64 KiB + 1 of inline text', 'x'.repeat(INLINE_MAX + 1)),
  closes('* then 64 KiB of digits', `*${'1'.repeat(INLINE_MAX)}`),
  closes('$ line of 64 KiB + 1', `*1\r\n$${'1'.repeat(INLINE_MAX)}`),
  closes('$NUL then payload...: too big bulk count string', Buffer.concat([bytes('*1\r\n'), padded('$\x00')])),
  closes('a NUL in a $ line hides its CR', Buffer.concat([bytes('*1\r\n'), padded('$3\x00\r\n')])),
  closes('no CR where $ is due: too big, not expected $', Buffer.concat([bytes('*1\r\n'), Buffer.alloc(INLINE_MAX + 1, 'P')])),
  // Order: replies owed before the error come first (one of them from a node).
  closes('pipeline, then an error', `PING\r\n${multibulk('GET', 'decoder:nokey')}ECHO x\r\n*1\r\n$-1\r\n`),
];

/** Before AUTH Redis refuses a count over 10 and a bulk over 16384 (requirepass on both sides). */
const AUTH_CASES: Case[] = [
  closes('unauthenticated *11', '*11\r\n'),
  open('unauthenticated *10 is read (then arity, before NOAUTH)', `*10\r\n$4\r\nECHO\r\n${'$1\r\nx\r\n'.repeat(9)}`),
  closes('unauthenticated $16385', '*1\r\n$16385\r\n'),
  open('unauthenticated $16384 is read (then NOAUTH)', multibulk('ECHO', 'y'.repeat(16384))),
  open('AUTH in the same write lifts the limits', `AUTH ${PASSWORD}\r\n*11\r\n$4\r\nECHO\r\n${'$1\r\nx\r\n'.repeat(10)}`),
];

const MODES = [0, 1, 8] as const;
const modeName = (size: number): string => (size === 0 ? 'whole' : `${size}-byte writes`);

interface Outcome {
  /** Every byte received, latin1 (one char a byte). */
  reply: string;
  closed: boolean;
  /** No outcome within OUTCOME_MS of the last write. */
  timedOut: boolean;
}

const sockets = new Set<net.Socket>();

interface Address {
  host: string;
  port: number;
}

/** Sends one case and reports what came back and whether the server closed. */
function exchange(to: Address, c: Case, size: number, sentinel: Buffer): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(to);
    sockets.add(socket);
    socket.setNoDelay(true);
    const chunks: Buffer[] = [];
    let received = 0;
    let ended = false;
    let closed = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (timedOut: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      sockets.delete(socket);
      resolve({ reply: Buffer.concat(chunks, received).toString('latin1'), closed, timedOut });
    };
    const arm = (ms: number): void => {
      clearTimeout(timer);
      timer = setTimeout(() => finish(true), ms);
    };
    socket.on('data', (d: Buffer) => {
      chunks.push(d);
      received += d.length;
      if (!c.closes && received >= SENTINEL_REPLY.length && Buffer.concat(chunks, received).subarray(-SENTINEL_REPLY.length).equals(SENTINEL_REPLY)) {
        finish(false);
      }
    });
    socket.on('end', () => {
      ended = true;
    });
    socket.on('error', () => undefined); // a reset after the server closed; 'close' follows
    socket.on('close', () => {
      closed = true;
      finish(false);
    });
    socket.once('connect', () => {
      arm(WRITE_MS);
      void (async () => {
        const step = size === 0 ? c.bytes.length : size;
        for (let i = 0; i < c.bytes.length && !ended && !closed; i += step) {
          socket.write(c.bytes.subarray(i, i + step));
          if (step < c.bytes.length) await new Promise((r) => setImmediate(r));
        }
        if (!c.closes && !ended && !closed) socket.write(sentinel);
        if (!closed) arm(OUTCOME_MS);
      })().catch(reject);
    });
  });
}

function show(o: Outcome): string {
  const text = JSON.stringify(o.reply.length > 200 ? `${o.reply.slice(0, 200)}...(${o.reply.length} bytes)` : o.reply);
  return `${text}, ${o.closed ? 'closed' : 'open'}${o.timedOut ? ', timed out' : ''}`;
}

/** Runs a case against both, in parallel, and compares. */
async function compare(reference: Address, slotproxy: Address, c: Case, size: number, sentinel: Buffer): Promise<void> {
  const [ref, proxy] = await Promise.all([exchange(reference, c, size, sentinel), exchange(slotproxy, c, size, sentinel)]);
  // The case is well made: the reference reached an outcome, the one the case says.
  expect({ closed: ref.closed, timedOut: ref.timedOut }).toEqual({ closed: c.closes, timedOut: false });
  if (proxy.reply !== ref.reply || proxy.closed !== ref.closed) {
    throw new Error(`${c.name} (${modeName(size)}):\n  redis:     ${show(ref)}\n  slotproxy: ${show(proxy)}`);
  }
}

const table = (cases: Case[]): [string, string, Case, number][] =>
  cases.flatMap((c) => MODES.map((size) => [c.name, modeName(size), c, size] as [string, string, Case, number]));

afterEach(() => {
  for (const s of sockets) s.destroy();
  sockets.clear();
});

describe('request decoding, byte for byte against Redis', () => {
  const reference = useCluster({ masters: 1, replicasPerMaster: 0 });
  // Redis 7.0's own multibulk limit (INT_MAX); the proxy's default is lower, to bound memory.
  const { cluster, proxy } = useProxy({ limits: { maxArgs: 2_147_483_647 } }, { masters: 3, replicasPerMaster: 0 });
  const ref = (): Address => reference().nodes[0];

  test.each(table(CASES))('%s (%s)', async (_name, _mode, c, size) => {
    await compare(ref(), proxy().address, c, size, SENTINEL);
  }, WRITE_MS + OUTCOME_MS + 10_000);

  describe('before AUTH (requirepass on the reference, auth.password on the proxy)', () => {
    let authProxy: ProxyServer | undefined;

    beforeAll(async () => {
      await reference().nodes[0].command('CONFIG', 'SET', 'requirepass', PASSWORD);
      authProxy = await startProxy(cluster().seeds, { auth: { password: PASSWORD }, limits: { maxArgs: 2_147_483_647 } });
    }, 30_000);

    afterAll(async () => {
      await authProxy?.close(500);
      // Leave the reference as it was for anything after this block.
      await exchange(ref(), open('unset requirepass', `AUTH ${PASSWORD}\r\n${multibulk('CONFIG', 'SET', 'requirepass', '')}`), 0, SENTINEL);
    }, 30_000);

    test.each(table(AUTH_CASES))('%s (%s)', async (_name, _mode, c, size) => {
      if (authProxy === undefined) throw new Error('the auth proxy did not start');
      await compare(ref(), authProxy.address, c, size, AUTH_SENTINEL);
    }, WRITE_MS + OUTCOME_MS + 10_000);
  });
});
