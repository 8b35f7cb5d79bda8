// RequestDecoder: client requests (RESP multibulk and inline) from a byte stream. Every fixture is fed
// whole, byte by byte and in random-size chunks, and must give the same requests every time.
import { DecoderLimits, RequestDecoder, RequestSink, splitInlineArgs } from '../../proxy/resp/request-decoder';
import { randInt, xorshift32 } from '../helpers/random';

// ---------------------------------------------------------------------------------------------
// Helpers

/** Seeded PRNG (xorshift32), so a failing random case can be reproduced from its seed. */

type Arg = string | Buffer;

function toBuf(a: Arg): Buffer {
  return typeof a === 'string' ? Buffer.from(a, 'latin1') : a;
}

/** Canonical RESP encoding of one request. */
function encodeRequest(args: readonly Arg[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const b = toBuf(a);
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

/** What the sink saw, in order. Args are kept as handed over (not copied), so aliasing bugs show. */
interface Delivered {
  args: Buffer[];
  raw: Buffer | null;
}

class Recorder implements RequestSink {
  readonly requests: Delivered[] = [];
  /** As Session.authenticated: false makes the decoder apply Redis's limits before AUTH. */
  authenticated = true;
  readonly errors: string[] = [];
  /** Sink calls that came after a protocol error (must stay 0). */
  callsAfterError = 0;

  onRequest(args: Buffer[], raw: Buffer | null): void {
    if (this.errors.length > 0) this.callsAfterError++;
    this.requests.push({ args, raw });
  }

  onProtocolError(message: string): void {
    if (this.errors.length > 0) this.callsAfterError++;
    this.errors.push(message);
  }
}

const LIMITS: DecoderLimits = { maxRequestBytes: 1024, maxArgs: 16, maxInlineBytes: 64 };

type FeedMode = 'whole' | 'byte by byte' | 'random chunks';
const MODES: FeedMode[] = ['whole', 'byte by byte', 'random chunks'];

/** Cuts `input` into chunks (fresh copies, as a socket hands them over). */
function chunksOf(input: Buffer, mode: FeedMode, rng: () => number, maxChunk = 9): Buffer[] {
  if (mode === 'whole') return [Buffer.from(input)];
  const out: Buffer[] = [];
  let pos = 0;
  while (pos < input.length) {
    const n = mode === 'byte by byte' ? 1 : randInt(rng, 1, maxChunk);
    out.push(Buffer.from(input.subarray(pos, pos + n)));
    pos += n;
  }
  return out;
}

interface FeedResult {
  rec: Recorder;
  decoder: RequestDecoder;
  /** [start, end) offset in the input of every chunk. */
  bounds: Array<[number, number]>;
}

function feed(chunks: Buffer[], limits: DecoderLimits = LIMITS): FeedResult {
  const rec = new Recorder();
  const decoder = new RequestDecoder(limits, rec);
  const bounds: Array<[number, number]> = [];
  let pos = 0;
  for (const c of chunks) {
    bounds.push([pos, pos + c.length]);
    pos += c.length;
    decoder.push(c);
  }
  return { rec, decoder, bounds };
}

function argsAsLatin1(rs: readonly Delivered[]): string[][] {
  return rs.map((r) => r.args.map((a) => a.toString('latin1')));
}

function hex(b: Buffer): string {
  return b.toString('hex');
}

// ---------------------------------------------------------------------------------------------
// Fixtures: built from parts, so the expected raw bytes of every request are known.

interface Part {
  bytes: Buffer;
  /** The request this part is, or null when it is ignored (`*0`, an empty line). */
  args: Buffer[] | null;
  /** Expected `raw` when the part arrives in one chunk: its bytes for multibulk, null for inline. */
  raw: Buffer | null;
}

function mb(...args: Arg[]): Part {
  const bytes = encodeRequest(args);
  return { bytes, args: args.map(toBuf), raw: bytes };
}

/** A multibulk request written by hand (non-canonical bytes). */
function mbRaw(bytes: string | Buffer, args: Arg[]): Part {
  const b = toBuf(bytes);
  return { bytes: b, args: args.map(toBuf), raw: b };
}

function inline(line: string | Buffer, args: Arg[]): Part {
  return { bytes: toBuf(line), args: args.map(toBuf), raw: null };
}

function ignored(bytes: string): Part {
  return { bytes: Buffer.from(bytes, 'latin1'), args: null, raw: null };
}

interface Fixture {
  name: string;
  parts: Part[];
}

const BINARY = Buffer.from([0x00, 0x0d, 0x0a, 0x80, 0x9f, 0xc3, 0x28, 0xfe, 0xff, 0x2a, 0x24, 0x0d]);
const ALL_BYTES = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

const VALID: Fixture[] = [
  { name: 'PING multibulk', parts: [mb('PING')] },
  { name: 'lower case command', parts: [mb('ping')] },
  { name: 'SET with options', parts: [mb('SET', 'key', 'value', 'EX', '10', 'NX')] },
  { name: 'bulk containing \\r\\n', parts: [mb('SET', 'k', 'a\r\nb\r\n')] },
  { name: 'bulk that is only \\r\\n', parts: [mb('SET', 'k', '\r\n')] },
  { name: 'binary bulk (NUL, CR, LF, 0x80-0xff)', parts: [mb('SET', BINARY, BINARY)] },
  { name: 'every byte value in one bulk', parts: [mb('SET', 'k', ALL_BYTES)] },
  { name: 'empty bulks $0', parts: [mb('SET', '', '')] },
  { name: 'one empty bulk only', parts: [mb('')] },
  { name: '*0 is ignored', parts: [ignored('*0\r\n')] },
  // Redis 7.0 skips any count <= 0 (processMultibulkBuffer: `if (ll <= 0) return C_OK`).
  { name: 'negative counts are ignored, as Redis does', parts: [ignored('*-1\r\n'), ignored('*-5\r\n'), ignored('*-10\r\n'), mb('PING')] },
  { name: '*LLONG_MIN is a number (string2ll), so ignored', parts: [ignored('*-9223372036854775808\r\n'), mb('PING')] },
  { name: '*0 between requests', parts: [mb('GET', 'a'), ignored('*0\r\n'), ignored('*0\r\n'), mb('GET', 'b')] },
  {
    name: 'pipelined requests in one buffer',
    parts: [mb('SET', 'a', '1'), mb('INCR', 'a'), mb('GET', 'a'), mb('DEL', 'a', 'b', 'c'), mb('PING')],
  },
  { name: 'maxArgs arguments exactly', parts: [mb('MGET', ...Array.from({ length: 15 }, (_, i) => `k${i}`))] },
  { name: 'one bulk of maxRequestBytes exactly', parts: [mb(Buffer.alloc(1024, 0x61))] },
  { name: 'bulks summing to maxRequestBytes exactly', parts: [mb('SET', 'k', Buffer.alloc(1024 - 4, 0x62))] },
  {
    name: 'like Redis, the two bytes after a bulk are taken as its CRLF unchecked',
    parts: [mbRaw('*2\r\n$3\r\nGET\r\n$1\r\nkXY', ['GET', 'k'])],
  },
  { name: 'inline PING CRLF', parts: [inline('PING\r\n', ['PING'])] },
  { name: 'inline PING bare LF', parts: [inline('PING\n', ['PING'])] },
  { name: 'inline with arguments', parts: [inline('SET a b\r\n', ['SET', 'a', 'b'])] },
  { name: 'inline with runs of blanks and tabs', parts: [inline('  SET \t a   b \t\r\n', ['SET', 'a', 'b'])] },
  {
    name: 'inline quoting: "a b" \'c d\' "\\x41\\n"',
    parts: [inline('ECHO "a b" \'c d\' "\\x41\\n"\r\n', ['ECHO', 'a b', 'c d', 'A\n'])],
  },
  {
    name: 'inline double-quote escapes \\n \\r \\t \\b \\a \\\\ \\" and unknown ones',
    parts: [inline('ECHO "\\n\\r\\t\\b\\a\\\\\\"\\q"\r\n', ['ECHO', '\n\r\t\b\x07\\"q'])],
  },
  { name: 'inline \\x escapes, both cases of hex digits', parts: [inline('ECHO "\\xff\\xFe\\x00\\x7a"\n', ['ECHO', Buffer.from([0xff, 0xfe, 0x00, 0x7a])])] },
  { name: 'inline \\x not followed by two hex digits is a plain escape', parts: [inline('ECHO "\\x4" "\\xg1"\r\n', ['ECHO', 'x4', 'xg1'])] },
  { name: "inline single quotes keep backslashes, only \\' is an escape", parts: [inline("ECHO 'it\\'s \\n'\r\n", ['ECHO', "it's \\n"])] },
  { name: 'inline empty quoted arguments', parts: [inline('SET k ""\r\n', ['SET', 'k', '']), inline("SET k ''\r\n", ['SET', 'k', ''])] },
  { name: 'inline quotes in the middle of a word join it', parts: [inline('ECHO ab"c d"\r\n', ['ECHO', 'abc d'])] },
  { name: 'inline closing quote followed by a tab', parts: [inline('ECHO "a"\tb\r\n', ['ECHO', 'a', 'b'])] },
  { name: 'inline bytes 0x80-0xff pass through', parts: [inline(Buffer.from([0x45, 0x43, 0x48, 0x4f, 0x20, 0x80, 0xe9, 0xff, 0x0d, 0x0a]), ['ECHO', Buffer.from([0x80, 0xe9, 0xff])])] },
  // Redis's sdssplitargs ends an unquoted word only at ' ', \n, \r, \t (isspace() skips blanks
  // *between* words, but \v and \f inside a word are kept): redis-server 7.0 echoes "a\vb".
  { name: 'inline \\v inside a word is kept (sdssplitargs)', parts: [inline('ECHO a\x0bb\r\n', ['ECHO', 'a\x0bb'])] },
  { name: 'empty inline lines are ignored', parts: [ignored('\r\n'), ignored('\n'), ignored('   \t \r\n'), inline('PING\r\n', ['PING'])] },
  { name: 'inline line of maxInlineBytes exactly', parts: [inline(`ECHO ${'x'.repeat(64 - 5)}\n`, ['ECHO', 'x'.repeat(59)])] },
  {
    name: 'inline and multibulk mixed',
    parts: [inline('PING\r\n', ['PING']), mb('GET', 'k'), inline('ECHO "x y"\n', ['ECHO', 'x y']), ignored('\r\n'), mb('PING')],
  },
  { name: 'a $ line that is not multibulk is an inline command', parts: [inline('$4\r\n', ['$4'])] },
];

interface ErrorFixture {
  name: string;
  input: Buffer;
  /** Requests delivered before the error. */
  before: Arg[][];
  error: string;
  limits?: DecoderLimits;
}

function err(name: string, input: string | Buffer, error: string, before: Arg[][] = [], limits?: DecoderLimits): ErrorFixture {
  return { name, input: toBuf(input), before, error, limits };
}

const MBULK = 'Protocol error: invalid multibulk length';
const BULK = 'Protocol error: invalid bulk length';
const HUGE_ARGS: DecoderLimits = { maxRequestBytes: 1024, maxArgs: Number.MAX_SAFE_INTEGER, maxInlineBytes: 64 };

const ERRORS: ErrorFixture[] = [
  err('*-0 (string2ll refuses it)', '*-0\r\n', MBULK),
  err('*LLONG_MIN-1 is no long long', '*-9223372036854775809\r\n', MBULK),
  err('*LLONG_MAX is past INT_MAX', '*9223372036854775807\r\n', MBULK, [], HUGE_ARGS),
  err('* line ended by the CR of the next line', '*1\n$4\r\n', MBULK),
  err('non-numeric multibulk length *abc', '*abc\r\n', MBULK),
  err('empty multibulk length *', '*\r\n', MBULK),
  err('multibulk length with a sign *+1', '*+1\r\n', MBULK),
  err('multibulk length 1.5', '*1.5\r\n', MBULK),
  err('multibulk length over INT_MAX *2147483648', '*2147483648\r\n', MBULK, [], HUGE_ARGS),
  err('absurd multibulk length', '*99999999999999999999999\r\n', MBULK, [], HUGE_ARGS),
  err('multibulk length over maxArgs', '*17\r\n', MBULK),
  // redis-server answers these with the same errors (string2ll refuses leading zeros).
  err('multibulk length with a leading zero *01', '*01\r\n$4\r\nPING\r\n', MBULK),
  err('bulk length with a leading zero $04', '*1\r\n$04\r\nPING\r\n', BULK),
  err('negative bulk length $-1', '*1\r\n$-1\r\n', BULK),
  err('non-numeric bulk length $abc', '*1\r\n$abc\r\n', BULK),
  err('empty bulk length $', '*1\r\n$\r\n', BULK),
  err('bulk length over maxRequestBytes, header only', '*1\r\n$1025\r\n', BULK),
  err('absurd bulk length, header only', '*1\r\n$99999999999999999999\r\n', BULK),
  err(
    'total request over maxRequestBytes, before the last body arrives',
    `*2\r\n$600\r\n${'a'.repeat(600)}\r\n$600\r\n`,
    'Protocol error: request larger than 1024 bytes',
  ),
  err("nested array: expected '$', got '*'", '*1\r\n*1\r\n$4\r\nPING\r\n', "Protocol error: expected '$', got '*'"),
  err("integer argument: expected '$', got ':'", '*1\r\n:1\r\n', "Protocol error: expected '$', got ':'"),
  err("simple string as second argument: got '+'", '*2\r\n$3\r\nGET\r\n+k\r\n', "Protocol error: expected '$', got '+'"),
  err("inline text where a bulk is due: got 'P'", '*1\r\nPING\r\n', "Protocol error: expected '$', got 'P'"),
  err('unbalanced double quote', 'ECHO "abc\r\n', 'Protocol error: unbalanced quotes in request'),
  err('unbalanced single quote', "ECHO 'abc\r\n", 'Protocol error: unbalanced quotes in request'),
  err('closing quote followed by a letter', 'ECHO "a"b\r\n', 'Protocol error: unbalanced quotes in request'),
  err('escaped closing quote leaves the quote open', 'ECHO "abc\\"\r\n', 'Protocol error: unbalanced quotes in request'),
  err('inline line over maxInlineBytes without newline', 'x'.repeat(65), 'Protocol error: too big inline request'),
  // A NUL ends Redis's strchr(): the line's end behind it is never found, the line only grows.
  err('a NUL hides an inline line end', `PING\x00\r\n${'x'.repeat(58)}`, 'Protocol error: too big inline request'),
  err('a NUL hides a * line end', `*\x00\r\n${'x'.repeat(62)}`, 'Protocol error: too big mbulk count string'),
  err('a NUL hides a $ line end', `*1\r\n$3\x00\r\n${'x'.repeat(60)}`, 'Protocol error: too big bulk count string'),
  err("no CR where $ is due: too big, not expected '$'", `*1\r\n${'P'.repeat(65)}`, 'Protocol error: too big bulk count string'),
  err("a CR where $ is due is written as a space", '*1\r\n\r\n', "Protocol error: expected '$', got ' '"),
  err("an LF where $ is due is written as a space", '*1\r\n\n\r\n', "Protocol error: expected '$', got ' '"),
  err("byte 0xff where $ is due is named as it is (latin1)", '*1\r\n\xff\r\n', "Protocol error: expected '$', got '\xff'"),
  err('multibulk count line over maxInlineBytes', `*${'1'.repeat(70)}`, 'Protocol error: too big mbulk count string'),
  err('bulk count line over maxInlineBytes', `*1\r\n$${'1'.repeat(70)}`, 'Protocol error: too big bulk count string'),
  err('requests before the error are delivered', 'PING\r\n*1\r\n$3\r\nGET\r\n*1\r\n$-1\r\n', BULK, [['PING'], ['GET']]),
  err('error inside the second request of a pipeline', `${encodeRequest(['SET', 'a', '1']).toString('latin1')}*2\r\n$3\r\nGET\r\n:1\r\n`, "Protocol error: expected '$', got ':'", [['SET', 'a', '1']]),
];

// ---------------------------------------------------------------------------------------------

describe('RequestDecoder fixtures', () => {
  const cases = VALID.flatMap((f) => MODES.map((mode) => [f.name, mode, f] as const));

  test.each(cases)('%s (%s)', (_name, mode, f) => {
    const input = Buffer.concat(f.parts.map((p) => p.bytes));
    const expected = f.parts.filter((p) => p.args !== null);
    // Several chunkings for the random mode, each seeded by its index.
    const rounds = mode === 'random chunks' ? 25 : 1;
    for (let round = 0; round < rounds; round++) {
      const rng = xorshift32(1000 + round);
      const chunks = chunksOf(input, mode, rng);
      const { rec, decoder, bounds } = feed(chunks);
      expect(rec.errors).toEqual([]);
      expect(argsAsLatin1(rec.requests)).toEqual(expected.map((p) => (p.args ?? []).map((a) => a.toString('latin1'))));
      expect(decoder.bufferedBytes).toBe(0);

      // raw: exact bytes when the request lay in one chunk, never anything but its exact bytes.
      let offset = 0;
      let k = 0;
      for (const p of f.parts) {
        const start = offset;
        offset += p.bytes.length;
        if (p.args === null) continue;
        const got = rec.requests[k++].raw;
        if (p.raw === null) {
          expect(got).toBeNull();
          continue;
        }
        const inOneChunk = bounds.some(([s, e]) => s <= start && offset <= e);
        if (mode === 'whole') expect(inOneChunk).toBe(true);
        if (mode === 'byte by byte') {
          expect(got).toBeNull();
        } else if (inOneChunk) {
          expect(got === null ? null : hex(got)).toBe(hex(p.raw));
        } else if (got !== null) {
          // Only the `*<n>` header was cut: the decoder may still hand out the (contiguous) bytes.
          expect(hex(got)).toBe(hex(p.raw));
        }
      }
    }
  });

  test('raw is a view of the chunk, not a copy, when the request came in one chunk', () => {
    const chunk = encodeRequest(['GET', 'k']);
    const { rec } = feed([chunk]);
    expect(rec.requests).toHaveLength(1);
    const raw = rec.requests[0].raw;
    expect(raw).not.toBeNull();
    expect((raw as Buffer).buffer).toBe(chunk.buffer);
    expect((raw as Buffer).byteOffset).toBe(chunk.byteOffset);
  });

  test('a request cut after its header has raw null', () => {
    const req = encodeRequest(['SET', 'k', 'v']);
    const { rec } = feed([req.subarray(0, 4), req.subarray(4, 15), req.subarray(15)]);
    expect(argsAsLatin1(rec.requests)).toEqual([['SET', 'k', 'v']]);
    expect(rec.requests[0].raw).toBeNull();
  });
});

describe('RequestDecoder protocol errors', () => {
  const cases = ERRORS.flatMap((f) => MODES.map((mode) => [f.name, mode, f] as const));

  test.each(cases)('%s (%s)', (_name, mode, f) => {
    const rounds = mode === 'random chunks' ? 10 : 1;
    for (let round = 0; round < rounds; round++) {
      const chunks = chunksOf(f.input, mode, xorshift32(77 + round));
      const { rec, decoder } = feed(chunks, f.limits ?? LIMITS);
      expect(rec.errors).toEqual([f.error]);
      expect(argsAsLatin1(rec.requests)).toEqual(f.before.map((r) => r.map((a) => toBuf(a).toString('latin1'))));
      // After the error the decoder is dead: valid input changes nothing.
      decoder.push(encodeRequest(['PING']));
      decoder.push(Buffer.from('PING\r\n'));
      expect(rec.errors).toEqual([f.error]);
      expect(rec.requests).toHaveLength(f.before.length);
      expect(rec.callsAfterError).toBe(0);
      expect(decoder.bufferedBytes).toBe(0);
    }
  });

  const BIG: DecoderLimits = { maxRequestBytes: 1_000_000, maxArgs: 16, maxInlineBytes: 64 };

  test('a bulk over maxRequestBytes is refused from its header alone', () => {
    const rec = new Recorder();
    const decoder = new RequestDecoder(BIG, rec);
    decoder.push(Buffer.from('*2\r\n$3\r\nSET\r\n$1000001\r\n'));
    expect(rec.errors).toEqual([BULK]);
    expect(rec.requests).toEqual([]);
    expect(decoder.bufferedBytes).toBe(0);
  });

  test('a request over maxRequestBytes is refused at the header that crosses the limit', () => {
    const rec = new Recorder();
    const decoder = new RequestDecoder(BIG, rec);
    decoder.push(Buffer.from('*3\r\n$3\r\nSET\r\n$600000\r\n'));
    const body = Buffer.alloc(600_002, 0x61);
    body.write('\r\n', 600_000);
    decoder.push(body);
    expect(rec.errors).toEqual([]);
    // 3 + 600000 + 399997 = 1000000: still allowed; one byte more is not.
    const ok = new Recorder();
    const okDecoder = new RequestDecoder(BIG, ok);
    okDecoder.push(Buffer.concat([Buffer.from('*3\r\n$3\r\nSET\r\n$600000\r\n'), body, Buffer.from('$399997\r\n')]));
    expect(ok.errors).toEqual([]);
    decoder.push(Buffer.from('$399998\r\n'));
    expect(rec.errors).toEqual(['Protocol error: request larger than 1000000 bytes']);
    expect(rec.requests).toEqual([]);
  });

  test('maxArgs is the largest accepted count', () => {
    const { rec } = feed([Buffer.from('*16\r\n')]);
    expect(rec.errors).toEqual([]);
    const { rec: rec2 } = feed([Buffer.from('*17\r\n')]);
    expect(rec2.errors).toEqual([MBULK]);
  });

  // The argument list is sized for at most 1024 up front (as Redis sizes argv); more still arrive whole.
  test('a request of more arguments than are reserved up front keeps every one, in order, and no hole', () => {
    const args = ['DEL', ...Array.from({ length: 2999 }, (_, i) => `k${i}`)];
    const limits = { maxRequestBytes: 1 << 20, maxArgs: 4096, maxInlineBytes: 64 };
    for (const chunks of [[encodeRequest(args)], [encodeRequest(args).subarray(0, 9000), encodeRequest(args).subarray(9000)]]) {
      const { rec } = feed(chunks.map((c) => Buffer.from(c)), limits);
      expect(rec.errors).toEqual([]);
      expect(rec.requests).toHaveLength(1);
      const got = rec.requests[0].args;
      expect(got).toHaveLength(3000);
      expect(got.every((a) => Buffer.isBuffer(a))).toBe(true);
      expect(got[0].toString()).toBe('DEL');
      expect(got[2999].toString()).toBe('k2998');
    }
  });

  // Redis counts the 64 KiB after each read, while the line has no end: a line whose end came in
  // the same read is decoded, whatever its length (what Redis does depends on its read sizes too).
  test('a long line whose end comes in the same chunk is decoded; held past the limit without it, too big', () => {
    const line = Buffer.from(`ECHO ${'x'.repeat(70)}\r\n`);
    const { rec } = feed([line]);
    expect(rec.errors).toEqual([]);
    expect(argsAsLatin1(rec.requests)).toEqual([['ECHO', 'x'.repeat(70)]]);
    for (const [head, message] of [
      [line, 'Protocol error: too big inline request'],
      [Buffer.from(`*${'1'.repeat(70)}\r\n`), 'Protocol error: too big mbulk count string'],
      [Buffer.from(`*1\r\n$${'1'.repeat(70)}\r\n`), 'Protocol error: too big bulk count string'],
    ] as const) {
      const cut = head.length - 2; // everything but the line's end
      const { rec: cutRec, decoder } = feed([head.subarray(0, cut), head.subarray(cut)]);
      expect(cutRec.errors).toEqual([message]);
      expect(cutRec.requests).toEqual([]);
      expect(decoder.bufferedBytes).toBe(0);
    }
  });

  test('a CR that is the last byte held is a line end still waiting for one byte: no "too big"', () => {
    const { rec, decoder } = feed([Buffer.from(`*${'1'.repeat(70)}\r`)]);
    expect(rec.errors).toEqual([]);
    expect(decoder.bufferedBytes).toBe(72);
    decoder.push(Buffer.from('\n'));
    expect(rec.errors).toEqual([MBULK]);
  });

  test("expected '$' waits for the line's CR, as Redis does", () => {
    const { rec, decoder } = feed([Buffer.from('*1\r\nPING')]);
    expect(rec.errors).toEqual([]);
    expect(decoder.bufferedBytes).toBe(4);
    decoder.push(Buffer.from('\r\n'));
    expect(rec.errors).toEqual(["Protocol error: expected '$', got 'P'"]);
  });

  test('before AUTH, a count over 10 and a bulk over 16384 are refused (Redis 7.0)', () => {
    const limits: DecoderLimits = { maxRequestBytes: 1_000_000, maxArgs: 1000, maxInlineBytes: 64 };
    const run = (input: string, authenticated: boolean): Recorder => {
      const rec = new Recorder();
      rec.authenticated = authenticated;
      new RequestDecoder(limits, rec).push(Buffer.from(input));
      return rec;
    };
    expect(run('*11\r\n', false).errors).toEqual(['Protocol error: unauthenticated multibulk length']);
    expect(run('*10\r\n', false).errors).toEqual([]);
    expect(run('*11\r\n', true).errors).toEqual([]);
    expect(run('*1\r\n$16385\r\n', false).errors).toEqual(['Protocol error: unauthenticated bulk length']);
    expect(run('*1\r\n$16384\r\n', false).errors).toEqual([]);
    expect(run('*1\r\n$16385\r\n', true).errors).toEqual([]);
    // An invalid count is named invalid first, as in Redis.
    expect(run('*2147483648\r\n', false).errors).toEqual([MBULK]);
    // The state is read when the header is: AUTH earlier in the same chunk counts.
    const rec = new Recorder();
    rec.authenticated = false;
    const decoder = new RequestDecoder(limits, {
      onRequest: (args, raw) => {
        if (args[0].toString() === 'AUTH') rec.authenticated = true;
        rec.onRequest(args, raw);
      },
      onProtocolError: (m) => rec.onProtocolError(m),
      get authenticated() {
        return rec.authenticated;
      },
    });
    decoder.push(Buffer.from(`AUTH pw\r\n*11\r\n${'$1\r\nx\r\n'.repeat(11)}`));
    expect(rec.errors).toEqual([]);
    expect(rec.requests).toHaveLength(2);
  });

  test('an inline line of maxInlineBytes without its newline is still waited for', () => {
    const { rec, decoder } = feed([Buffer.from('x'.repeat(64))]);
    expect(rec.errors).toEqual([]);
    expect(decoder.bufferedBytes).toBe(64);
    decoder.push(Buffer.from('\n'));
    expect(argsAsLatin1(rec.requests)).toEqual([['x'.repeat(64)]]);
  });
});

describe('RequestDecoder memory', () => {
  test('a big bulk streams in: bufferedBytes is bounded by what was received, nothing delivered early', () => {
    const size = 5 * 1024 * 1024;
    const limits: DecoderLimits = { maxRequestBytes: 8 * 1024 * 1024, maxArgs: 16, maxInlineBytes: 65536 };
    const rec = new Recorder();
    const decoder = new RequestDecoder(limits, rec);
    const header = Buffer.from(`*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$${size}\r\n`);
    decoder.push(header);
    let received = header.length;
    let bodyReceived = 0;
    expect(decoder.bufferedBytes).toBeLessThanOrEqual(received);
    const body = Buffer.alloc(size + 2);
    for (let i = 0; i < size; i++) body[i] = i & 0xff;
    body.write('\r\n', size);
    const concat = jest.spyOn(Buffer, 'concat');
    try {
      for (let pos = 0; pos < body.length; pos += 65536) {
        const chunk = Buffer.from(body.subarray(pos, pos + 65536));
        decoder.push(chunk);
        received += chunk.length;
        bodyReceived += chunk.length;
        if (bodyReceived < body.length) {
          expect(rec.requests).toHaveLength(0);
          expect(decoder.bufferedBytes).toBeGreaterThanOrEqual(bodyReceived);
          expect(decoder.bufferedBytes).toBeLessThanOrEqual(received);
        }
      }
      // The bulk is joined once, when whole, not re-joined on every chunk.
      expect(concat).toHaveBeenCalledTimes(1);
    } finally {
      concat.mockRestore();
    }
    expect(rec.errors).toEqual([]);
    expect(rec.requests).toHaveLength(1);
    const [cmd, key, value] = rec.requests[0].args;
    expect(cmd.toString()).toBe('SET');
    expect(key.toString()).toBe('k');
    expect(value.length).toBe(size);
    expect(value.equals(body.subarray(0, size))).toBe(true);
    expect(rec.requests[0].raw).toBeNull();
    expect(decoder.bufferedBytes).toBe(0);
  });

  test('a line written a byte at a time is scanned once and joined once', () => {
    const concat = jest.spyOn(Buffer, 'concat');
    try {
      const rec = new Recorder();
      const decoder = new RequestDecoder({ maxRequestBytes: 1024, maxArgs: 16, maxInlineBytes: 65536 }, rec);
      const line = Buffer.from(`ECHO ${'y'.repeat(60_000)}\r\n`);
      for (let i = 0; i < line.length; i++) decoder.push(line.subarray(i, i + 1));
      expect(argsAsLatin1(rec.requests)).toEqual([['ECHO', 'y'.repeat(60_000)]]);
      expect(concat).toHaveBeenCalledTimes(1);
      // A line that never ends is never joined: it is refused once more than 64 KiB are held.
      concat.mockClear();
      const rec2 = new Recorder();
      const decoder2 = new RequestDecoder({ maxRequestBytes: 1024, maxArgs: 16, maxInlineBytes: 65536 }, rec2);
      const junk = Buffer.alloc(65537, 'payload');
      junk[0] = 0;
      for (let i = 0; i < junk.length; i += 8) decoder2.push(junk.subarray(i, i + 8));
      expect(rec2.errors).toEqual(['Protocol error: too big inline request']);
      expect(concat).not.toHaveBeenCalled();
    } finally {
      concat.mockRestore();
    }
  });

  test('a partial inline line is held, then released', () => {
    const { rec, decoder } = feed([Buffer.from('ECHO hel')]);
    expect(decoder.bufferedBytes).toBe(8);
    decoder.push(Buffer.from('lo\r\n'));
    expect(argsAsLatin1(rec.requests)).toEqual([['ECHO', 'hello']]);
    expect(decoder.bufferedBytes).toBe(0);
  });
});

describe('splitInlineArgs (Redis sdssplitargs)', () => {
  test.each<[string, string[] | null]>([
    ['', []],
    ['   ', []],
    ['PING', ['PING']],
    ['SET a b', ['SET', 'a', 'b']],
    ['\tSET\t a  \t b ', ['SET', 'a', 'b']],
    ['"a b" \'c d\' "\\x41\\n"', ['a b', 'c d', 'A\n']],
    ['"\\x4a\\x4B"', ['JK']],
    ['"\\x4"', ['x4']],
    ['"\\n\\r\\t\\b\\a"', ['\n\r\t\b\x07']],
    ['"\\\\" "\\""', ['\\', '"']],
    ['"\\z"', ['z']],
    ["'a\\'b'", ["a'b"]],
    ["'a\\nb'", ['a\\nb']],
    ["'a\\\\b'", ['a\\\\b']],
    ['""', ['']],
    ["''", ['']],
    ['"" x', ['', 'x']],
    ['ab"c d"e', null],
    ['ab"c d"', ['abc d']],
    ["ab'c d'", ['abc d']],
    ['"a"b', null],
    ["'a'b", null],
    ['"abc', null],
    ["'abc", null],
    ['"abc\\"', null],
    ['"abc\\', null],
    ['"a" "b"', ['a', 'b']],
    ['a\x0bb', ['a\x0bb']],
    ['a\x0cb', ['a\x0cb']],
    ['\x0b a \x0c', ['a']],
  ])('%j', (line, expected) => {
    const got = splitInlineArgs(Buffer.from(line, 'latin1'));
    expect(got === null ? null : got.map((b) => b.toString('latin1'))).toEqual(expected);
  });
});

// ---------------------------------------------------------------------------------------------
// Fuzz: random and mutated inputs in random chunks.

const FUZZ_LIMITS: DecoderLimits = { maxRequestBytes: 200, maxArgs: 32, maxInlineBytes: 48 };
const SPECIAL = Buffer.from('*$\r\n-+:0123456789 \t"\'\\x{}', 'latin1');

function randomByte(rng: () => number): number {
  // One draw per byte: the low bits pick the kind of byte, the high bits the byte.
  const u = (rng() * 4294967296) >>> 0;
  const kind = u & 0xf;
  const v = u >>> 8;
  if (kind < 8) return SPECIAL[v % SPECIAL.length];
  if (kind < 13) return 0x61 + (v % 26);
  return v & 0xff;
}

function randomBytes(rng: () => number, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = randomByte(rng);
  return b;
}

const PLAIN = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:{}';

/** One inline token as typed, and the argument it stands for. */
function randomToken(rng: () => number): { text: string; value: number[] } {
  const kind = randInt(rng, 0, 2);
  if (kind === 0) {
    const n = randInt(rng, 1, 5);
    let text = '';
    for (let i = 0; i < n; i++) text += PLAIN[randInt(rng, 0, PLAIN.length - 1)];
    return { text, value: [...Buffer.from(text, 'latin1')] };
  }
  if (kind === 1) {
    let text = '"';
    const value: number[] = [];
    const n = randInt(rng, 0, 4);
    for (let i = 0; i < n; i++) {
      const piece = randInt(rng, 0, 5);
      if (piece === 0) {
        const v = randInt(rng, 0, 255);
        text += `\\x${v.toString(16).padStart(2, '0')}`;
        value.push(v);
      } else if (piece === 1) {
        text += '\\n';
        value.push(10);
      } else if (piece === 2) {
        text += '\\"';
        value.push(34);
      } else if (piece === 3) {
        text += "'";
        value.push(39);
      } else {
        const c = PLAIN[randInt(rng, 0, PLAIN.length - 1)];
        text += piece === 4 ? ` ${c}` : c;
        if (piece === 4) value.push(32);
        value.push(c.charCodeAt(0));
      }
    }
    return { text: `${text}"`, value };
  }
  let text = "'";
  const value: number[] = [];
  const n = randInt(rng, 0, 4);
  for (let i = 0; i < n; i++) {
    if (rng() < 0.3) {
      text += "\\'";
      value.push(39);
    } else if (rng() < 0.2) {
      // A backslash is kept as it is, unless a quote follows it: keep a letter after it.
      text += '\\n';
      value.push(92, 110);
    } else {
      const c = `${PLAIN} "`[randInt(rng, 0, PLAIN.length + 1)];
      text += c;
      value.push(c.charCodeAt(0));
    }
  }
  return { text: `${text}'`, value };
}

interface Generated {
  bytes: Buffer;
  requests: Buffer[][];
}

/** A valid stream within FUZZ_LIMITS, and the requests it holds. */
function generateValid(rng: () => number): Generated {
  const parts: Buffer[] = [];
  const requests: Buffer[][] = [];
  const n = randInt(rng, 1, 5);
  for (let i = 0; i < n; i++) {
    const kind = rng();
    if (kind < 0.5) {
      const argc = randInt(rng, 1, 6);
      const args: Buffer[] = [];
      for (let j = 0; j < argc; j++) args.push(randomBytes(rng, randInt(rng, 0, 20)));
      parts.push(encodeRequest(args));
      requests.push(args);
    } else if (kind < 0.85) {
      const tokens: { text: string; value: number[] }[] = [];
      let line = '';
      const count = randInt(rng, 1, 4);
      for (let j = 0; j < count; j++) {
        const t = randomToken(rng);
        const sep = j === 0 ? (rng() < 0.2 ? ' ' : '') : rng() < 0.7 ? ' ' : '\t ';
        if (line.length + sep.length + t.text.length > 40) break;
        line += sep + t.text;
        tokens.push(t);
      }
      if (tokens.length === 0 || line.startsWith('*')) continue;
      parts.push(Buffer.from(line + (rng() < 0.7 ? '\r\n' : '\n'), 'latin1'));
      requests.push(tokens.map((t) => Buffer.from(t.value)));
    } else if (kind < 0.93) {
      parts.push(Buffer.from('*0\r\n'));
    } else {
      parts.push(Buffer.from(rng() < 0.5 ? '\r\n' : ' \n'));
    }
  }
  return { bytes: Buffer.concat(parts), requests };
}

function mutate(rng: () => number, input: Buffer, other: Buffer): Buffer {
  let b = Buffer.from(input);
  const count = randInt(rng, 1, 3);
  for (let i = 0; i < count; i++) {
    const op = randInt(rng, 0, 6);
    const at = randInt(rng, 0, b.length);
    if (op === 0 && b.length > 0) {
      b[Math.min(at, b.length - 1)] = randomByte(rng);
    } else if (op === 1) {
      b = Buffer.concat([b.subarray(0, at), randomBytes(rng, randInt(rng, 1, 4)), b.subarray(at)]);
    } else if (op === 2) {
      b = Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + randInt(rng, 1, 6)))]);
    } else if (op === 3) {
      b = b.subarray(0, at);
    } else if (op === 4) {
      b = Buffer.concat([b.subarray(0, at), other.subarray(randInt(rng, 0, other.length))]);
    } else if (op === 5) {
      const tokens = ['*-1\r\n', '$-1\r\n', '*99\r\n', '$201\r\n', '*2147483648\r\n', '"', "'", '*1\r\n*1\r\n', 'x'.repeat(50)];
      b = Buffer.concat([b.subarray(0, at), Buffer.from(tokens[randInt(rng, 0, tokens.length - 1)]), b.subarray(at)]);
    } else {
      b = Buffer.concat([b, b.subarray(0, at)]);
    }
  }
  return b;
}

function sameRequests(a: readonly Delivered[], b: readonly Delivered[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    if (a[i].args.length !== b[i].args.length) return false;
    for (let j = 0; j < a[i].args.length; j++) if (!a[i].args[j].equals(b[i].args[j])) return false;
  }
  return true;
}

interface FuzzOutcome {
  /** What went wrong with this input, or null. */
  problem: string | null;
  /** Outcome of the whole feed, to check that the inputs exercise both outcomes. */
  requests: number;
  errors: number;
}

/** One fuzz case, fully determined by its seed. */
function fuzzOne(seed: number): FuzzOutcome {
  const rng = xorshift32(seed);
  const mode = rng();
  let input: Buffer;
  let expected: Buffer[][] | null = null;
  if (mode < 0.3) {
    const g = generateValid(rng);
    input = g.bytes;
    expected = g.requests;
  } else if (mode < 0.85) {
    input = mutate(rng, generateValid(rng).bytes, generateValid(rng).bytes);
  } else {
    input = randomBytes(rng, randInt(rng, 0, 80));
  }
  let whole: FeedResult;
  let chunked: FeedResult;
  try {
    whole = feed([Buffer.from(input)], FUZZ_LIMITS);
    chunked = feed(chunksOf(input, 'random chunks', rng, randInt(rng, 1, 12)), FUZZ_LIMITS);
  } catch (e) {
    return { problem: `exception ${String(e)} on ${hex(input)}`, requests: 0, errors: 0 };
  }
  const problem = checkFuzz(rng, input, expected, whole, chunked);
  return {
    problem: problem === null ? null : `${problem} (input ${hex(input)})`,
    requests: whole.rec.requests.length,
    errors: whole.rec.errors.length,
  };
}

function checkFuzz(rng: () => number, input: Buffer, expected: Buffer[][] | null, whole: FeedResult, chunked: FeedResult): string | null {
  for (const r of [whole, chunked]) {
    if (r.rec.errors.length > 1 || r.rec.callsAfterError > 0) return `calls after a protocol error: ${JSON.stringify(r.rec.errors)}`;
    if (r.rec.errors.length > 0 && !r.rec.errors[0].startsWith('Protocol error: ')) return `odd error ${r.rec.errors[0]}`;
    if (r.rec.errors.length > 0 && r.decoder.bufferedBytes !== 0) return 'bytes held after the error';
    if (r.decoder.bufferedBytes > input.length) return `bufferedBytes ${r.decoder.bufferedBytes} > input ${input.length}`;
  }
  // As in Redis, a line longer than maxInlineBytes is "too big" only if a read (chunk) ends while it
  // has no end yet: cut into chunks, the feed may stop there, after a prefix of the whole feed's requests.
  const tooBig = chunked.rec.errors.length > 0 && chunked.rec.errors[0].startsWith('Protocol error: too big');
  if (tooBig && !sameRequests(chunked.rec.requests, whole.rec.requests.slice(0, chunked.rec.requests.length))) {
    return 'chunked feed stopped as too big after other requests than the whole feed';
  } else if (!tooBig && !sameRequests(whole.rec.requests, chunked.rec.requests)) {
    return 'chunked feed gave other requests than the whole feed';
  } else if (!tooBig && JSON.stringify(whole.rec.errors) !== JSON.stringify(chunked.rec.errors)) {
    return `chunked feed gave other errors: ${JSON.stringify(whole.rec.errors)} vs ${JSON.stringify(chunked.rec.errors)}`;
  }
  if (expected !== null) {
    if (whole.rec.errors.length > 0) return `valid input refused: ${whole.rec.errors[0]}`;
    const want: Delivered[] = expected.map((args) => ({ args, raw: null }));
    if (!sameRequests(whole.rec.requests, want)) return 'valid input decoded to other requests than generated';
    if (whole.decoder.bufferedBytes !== 0) return 'valid input left bytes behind';
  }
  // Every raw decodes, alone, to exactly its request.
  for (const r of [...whole.rec.requests, ...chunked.rec.requests]) {
    if (r.raw === null) continue;
    const alone = feed([Buffer.from(r.raw)], FUZZ_LIMITS);
    if (alone.rec.errors.length > 0 || !sameRequests(alone.rec.requests, [r]) || alone.decoder.bufferedBytes !== 0) {
      return `raw ${hex(r.raw)} is not exactly its request`;
    }
  }
  // Re-encoded and re-decoded, the requests round-trip, with raw the canonical bytes.
  if (whole.rec.requests.length > 0) {
    const encoded = whole.rec.requests.map((r) => encodeRequest(r.args));
    const again = feed([Buffer.concat(encoded)], FUZZ_LIMITS);
    if (again.rec.errors.length > 0) return `re-encoded requests refused: ${again.rec.errors[0]}`;
    if (!sameRequests(again.rec.requests, whole.rec.requests)) return 're-encoded requests did not round-trip';
    for (let i = 0; i < encoded.length; i++) {
      const raw = again.rec.requests[i].raw;
      if (raw === null || !raw.equals(encoded[i])) return `raw of re-encoded request ${i} is not its bytes`;
    }
    const againChunked = feed(chunksOf(Buffer.concat(encoded), 'random chunks', rng, 7), FUZZ_LIMITS);
    if (againChunked.rec.errors.length > 0 || !sameRequests(againChunked.rec.requests, whole.rec.requests)) {
      return 're-encoded requests did not round-trip in chunks';
    }
  }
  return null;
}

/** Each case is fully determined by its seed: a reported seed reproduces with fuzzOne(seed). */
const FUZZ_CASES = 100_000;

describe('RequestDecoder fuzz', () => {
  test('100,000 random and mutated inputs in random chunks', () => {
    const failures: string[] = [];
    let withRequests = 0;
    let withErrors = 0;
    for (let i = 0; i < FUZZ_CASES && failures.length < 5; i++) {
      const seed = 0x5eed0000 + i;
      const out = fuzzOne(seed);
      if (out.problem !== null) failures.push(`seed ${seed}: ${out.problem}`);
      if (out.requests > 0) withRequests++;
      if (out.errors > 0) withErrors++;
    }
    expect(failures).toEqual([]);
    // Both outcomes are exercised, and often.
    expect(withRequests).toBeGreaterThan(30_000);
    expect(withErrors).toBeGreaterThan(20_000);
  });
});
