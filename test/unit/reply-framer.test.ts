// ReplyFramer: back-end replies (RESP2 and RESP3) cut into whole raw frames. Every fixture is fed
// whole, byte by byte and in random chunks, alone and concatenated in a stream: the frames must come
// out byte-identical and in order.
import { ReplyFramer, ReplyFramingError, arrayElementBounds } from '../../proxy/resp/reply-framer';
import { randInt, xorshift32 } from '../helpers/random';

/** Seeded PRNG (xorshift32), so a failing random case can be reproduced from its seed. */

type FeedMode = 'whole' | 'byte by byte' | 'random chunks';
const MODES: FeedMode[] = ['whole', 'byte by byte', 'random chunks'];

function chunksOf(input: Buffer, mode: FeedMode, rng: () => number, maxChunk = 11): Buffer[] {
  if (mode === 'whole') return [Buffer.from(input)];
  const out: Buffer[] = [];
  for (let pos = 0; pos < input.length; ) {
    const n = mode === 'byte by byte' ? 1 : randInt(rng, 1, maxChunk);
    out.push(Buffer.from(input.subarray(pos, pos + n)));
    pos += n;
  }
  return out;
}

/** Frames as hex (readable diffs), kept as handed over, so later pushes overwriting them would show. */
function frame(chunks: Buffer[], framer = new ReplyFramer()): { frames: Buffer[]; framer: ReplyFramer } {
  const frames: Buffer[] = [];
  for (const c of chunks) framer.push(c, (f) => frames.push(f));
  return { frames, framer };
}

const hexes = (bs: readonly Buffer[]): string[] => bs.map((b) => b.toString('hex'));
const b = (s: string): Buffer => Buffer.from(s, 'latin1');

const BINARY = Buffer.from([0x00, 0x0d, 0x0a, 0x80, 0xff, 0x2a, 0x24, 0x0d, 0x0a, 0x2d]);

const REPLIES: Array<[string, Buffer]> = [
  ['simple string', b('+OK\r\n')],
  ['empty simple string', b('+\r\n')],
  ['error', b('-ERR unknown command \'FOO\', with args beginning with: \r\n')],
  ['MOVED error', b('-MOVED 3999 127.0.0.1:6381\r\n')],
  ['integer', b(':1000\r\n')],
  ['negative integer', b(':-42\r\n')],
  ['bulk', b('$5\r\nhello\r\n')],
  ['empty bulk', b('$0\r\n\r\n')],
  ['null bulk $-1', b('$-1\r\n')],
  ['bulk containing \\r\\n', b('$8\r\na\r\nb\r\n\r\n\r\n')],
  ['bulk that looks like replies', b('$12\r\n+OK\r\n:1\r\n*1\r\r\n')],
  ['binary bulk', Buffer.concat([b(`$${BINARY.length}\r\n`), BINARY, b('\r\n')])],
  ['null array *-1', b('*-1\r\n')],
  ['empty array', b('*0\r\n')],
  ['array of bulks', b('*3\r\n$3\r\nfoo\r\n$-1\r\n$3\r\nbar\r\n')],
  ['array of mixed types', b('*5\r\n:1\r\n+two\r\n$5\r\nthree\r\n-ERR four\r\n*0\r\n')],
  ['nested arrays 3 deep', b('*2\r\n*2\r\n*2\r\n:1\r\n:2\r\n*0\r\n$1\r\nx\r\n')],
  ['nested arrays ending together', b('*1\r\n*1\r\n*1\r\n:7\r\n')],
  ['array holding a null array', b('*2\r\n*-1\r\n:1\r\n')],
  ['CLUSTER SLOTS shape', b('*1\r\n*4\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nid\r\n*3\r\n$9\r\n127.0.0.1\r\n:7004\r\n$3\r\nid4\r\n')],
  ['RESP3 map %', b('%2\r\n+first\r\n:1\r\n+second\r\n*2\r\n:2\r\n:3\r\n')],
  ['RESP3 empty map', b('%0\r\n')],
  ['RESP3 set ~', b('~3\r\n+a\r\n+b\r\n$1\r\nc\r\n')],
  ['RESP3 push >', b('>3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n')],
  ['RESP3 double ,', b(',3.14159\r\n')],
  ['RESP3 double inf', b(',-inf\r\n')],
  ['RESP3 bool true #t', b('#t\r\n')],
  ['RESP3 bool false #f', b('#f\r\n')],
  ['RESP3 null _', b('_\r\n')],
  ['RESP3 big number (', b('(3492890328409238509324850943850943825024385\r\n')],
  ['RESP3 verbatim =', b('=15\r\ntxt:Some string\r\n')],
  ['RESP3 verbatim with \\r\\n', b('=8\r\ntxt:a\r\nb\r\n')],
  ['RESP3 blob error !', b('!21\r\nSYNTAX invalid syntax\r\n')],
  ['RESP3 attribute | followed by its value', b('|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n')],
  ['RESP3 attribute before a simple value', b('|1\r\n+ttl\r\n:3600\r\n$3\r\nval\r\n')],
  ['RESP3 empty attribute before a value', b('|0\r\n:1\r\n')],
  ['RESP3 attribute inside an array', b('*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n')],
  ['RESP3 map of maps', b('%1\r\n$1\r\nk\r\n%1\r\n$1\r\nj\r\n~1\r\n_\r\n')],
];

describe('ReplyFramer fixtures', () => {
  const cases = REPLIES.flatMap(([name, bytes]) => MODES.map((mode) => [name, mode, bytes] as const));

  test.each(cases)('%s (%s)', (_name, mode, bytes) => {
    const rounds = mode === 'random chunks' ? 20 : 1;
    for (let round = 0; round < rounds; round++) {
      const { frames, framer } = frame(chunksOf(bytes, mode, xorshift32(round)));
      expect(hexes(frames)).toEqual([bytes.toString('hex')]);
      expect(framer.bufferedBytes).toBe(0);
    }
  });

  test.each(REPLIES)('%s: nothing comes out before its last byte', (_name, bytes) => {
    const framer = new ReplyFramer();
    const frames: Buffer[] = [];
    framer.push(Buffer.from(bytes.subarray(0, bytes.length - 1)), (f) => frames.push(f));
    expect(frames).toEqual([]);
    expect(framer.bufferedBytes).toBe(bytes.length - 1);
    framer.push(Buffer.from(bytes.subarray(bytes.length - 1)), (f) => frames.push(f));
    expect(hexes(frames)).toEqual([bytes.toString('hex')]);
  });
});

describe('ReplyFramer streams', () => {
  const stream = Buffer.concat(REPLIES.map(([, bytes]) => bytes));
  const expected = REPLIES.map(([, bytes]) => bytes.toString('hex'));

  test.each(MODES)('every fixture concatenated in one stream (%s)', (mode) => {
    const rounds = mode === 'random chunks' ? 50 : 1;
    for (let round = 0; round < rounds; round++) {
      const { frames, framer } = frame(chunksOf(stream, mode, xorshift32(100 + round), 40));
      expect(hexes(frames)).toEqual(expected);
      expect(framer.bufferedBytes).toBe(0);
    }
  });

  test('random sequences of fixtures in random chunks keep order', () => {
    for (let seed = 1; seed <= 500; seed++) {
      const rng = xorshift32(seed);
      const picked = Array.from({ length: randInt(rng, 1, 30) }, () => REPLIES[randInt(rng, 0, REPLIES.length - 1)][1]);
      const { frames } = frame(chunksOf(Buffer.concat(picked), 'random chunks', rng, randInt(rng, 1, 64)));
      expect({ seed, frames: hexes(frames) }).toEqual({ seed, frames: hexes(picked) });
    }
  });

  test('frames that lie in one chunk are views of it, not copies', () => {
    const chunk = b('+OK\r\n:1\r\n');
    const { frames } = frame([chunk]);
    expect(hexes(frames)).toEqual([b('+OK\r\n').toString('hex'), b(':1\r\n').toString('hex')]);
    expect(frames[0].buffer).toBe(chunk.buffer);
    expect(frames[1].byteOffset).toBe(chunk.byteOffset + 5);
  });

  test('a frame split over many chunks, with whole frames before and after it in the same chunks', () => {
    const big = b('*4\r\n$3\r\nfoo\r\n*2\r\n:1\r\n$2\r\nab\r\n%1\r\n+k\r\n+v\r\n$-1\r\n');
    const input = Buffer.concat([b('+before\r\n'), big, b(':9\r\n')]);
    // Cut: the first frame and a few bytes of the big one; then 3-byte pieces; the last one carries ':9'.
    const chunks = [input.subarray(0, 12)];
    let pos = 12;
    while (pos < input.length - 6) {
      chunks.push(input.subarray(pos, pos + 3));
      pos += 3;
    }
    chunks.push(input.subarray(pos));
    const frames: string[] = [];
    const framer = new ReplyFramer();
    const counts: number[] = [];
    for (const c of chunks) {
      framer.push(Buffer.from(c), (f) => frames.push(f.toString('latin1')));
      counts.push(frames.length);
    }
    expect(frames).toEqual(['+before\r\n', big.toString('latin1'), ':9\r\n']);
    // The big frame came out with the last chunk only.
    expect(counts.slice(0, -1).every((n) => n === 1)).toBe(true);
    expect(counts[counts.length - 1]).toBe(3);
  });

  test('a 100,000-element array in 4 KiB chunks is framed once, with O(n) copying', () => {
    const parts = [b('*100000\r\n')];
    for (let i = 0; i < 100_000; i++) parts.push(b(`$6\r\nkey${String(i % 1000).padStart(3, '0')}\r\n`));
    const reply = Buffer.concat(parts);
    const framer = new ReplyFramer();
    const frames: Buffer[] = [];
    const alloc = jest.spyOn(Buffer, 'allocUnsafe');
    try {
      for (let pos = 0; pos < reply.length; pos += 4096) {
        framer.push(Buffer.from(reply.subarray(pos, pos + 4096)), (f) => frames.push(f));
      }
      // Doubling growth: all buffers together stay within a small multiple of the reply.
      const allocated = alloc.mock.calls.reduce((sum, [n]) => sum + n, 0);
      expect(allocated).toBeLessThanOrEqual(4 * reply.length);
    } finally {
      alloc.mockRestore();
    }
    expect(frames).toHaveLength(1);
    expect(frames[0].equals(reply)).toBe(true);
  });

  test('a 5 MB bulk in 64 KiB chunks is framed once, with O(n) copying', () => {
    const size = 5 * 1024 * 1024;
    const payload = Buffer.alloc(size);
    for (let i = 0; i < size; i++) payload[i] = (i * 31) & 0xff;
    // \r\n inside the payload must not end anything.
    payload.write('\r\n+OK\r\n', 1000);
    const reply = Buffer.concat([b(`$${size}\r\n`), payload, b('\r\n')]);
    const framer = new ReplyFramer();
    const frames: Buffer[] = [];
    const alloc = jest.spyOn(Buffer, 'allocUnsafe');
    try {
      for (let pos = 0; pos < reply.length; pos += 65536) {
        framer.push(Buffer.from(reply.subarray(pos, pos + 65536)), (f) => frames.push(f));
        if (pos + 65536 < reply.length) {
          expect(frames).toHaveLength(0);
          expect(framer.bufferedBytes).toBe(pos + 65536);
        }
      }
      // The announced length is known from the header: one buffer of the whole size, no regrowth.
      const allocated = alloc.mock.calls.reduce((sum, [n]) => sum + n, 0);
      expect(allocated).toBeLessThanOrEqual(2 * reply.length);
    } finally {
      alloc.mockRestore();
    }
    expect(frames).toHaveLength(1);
    expect(frames[0].length).toBe(reply.length);
    expect(frames[0].length).toBe(`$${size}\r\n`.length + size + 2);
    expect(frames[0].equals(reply)).toBe(true);
    expect(framer.bufferedBytes).toBe(0);
  });

  test('a 5 MB bulk inside an array, after other elements, followed by a frame', () => {
    const size = 5 * 1024 * 1024;
    const reply = Buffer.concat([b(`*3\r\n:1\r\n$${size}\r\n`), Buffer.alloc(size, 0x0d), b('\r\n$-1\r\n')]);
    const input = Buffer.concat([reply, b('+OK\r\n')]);
    const frames: Buffer[] = [];
    const framer = new ReplyFramer();
    for (let pos = 0; pos < input.length; pos += 65536) framer.push(Buffer.from(input.subarray(pos, pos + 65536)), (f) => frames.push(f));
    expect(frames.map((f) => f.length)).toEqual([reply.length, 5]);
    expect(frames[0].equals(reply)).toBe(true);
    expect(frames[1].toString()).toBe('+OK\r\n');
  });
});

describe('ReplyFramer garbage', () => {
  test.each<[string, string, string[]]>([
    ['unknown type byte', '@foo\r\n', []],
    ['inline text', 'hello world\r\n', []],
    ['garbage after a whole frame', '+OK\r\n?x\r\n', ['+OK\r\n']],
    ['garbage inside an array', '*2\r\n:1\r\n@x\r\n', []],
    ['non-numeric bulk length', '$abc\r\nabc\r\n', []],
    ['empty bulk length', '$\r\n\r\n', []],
    ['non-numeric array length', '*x\r\n', []],
    ['lone minus as a length', '*-\r\n', []],
  ])('%s throws ReplyFramingError', (_name, input, before) => {
    for (const mode of MODES) {
      const framer = new ReplyFramer();
      const frames: string[] = [];
      const push = (): void => {
        for (const c of chunksOf(b(input), mode, xorshift32(5))) framer.push(c, (f) => frames.push(f.toString('latin1')));
      };
      expect(push).toThrow(ReplyFramingError);
      expect(frames).toEqual(before);
    }
  });

  test('the error names the bad type byte', () => {
    expect(() => new ReplyFramer().push(b('@foo\r\n'), () => undefined)).toThrow('not a RESP reply: type byte 0x40');
  });
});

describe('arrayElementBounds', () => {
  const raw = (s: string): Buffer => Buffer.from(s, 'latin1');
  /** The elements the bounds point at, as text. */
  const elementsOf = (frame: Buffer): string[] | undefined => {
    const bounds = arrayElementBounds(frame);
    if (bounds === null) return undefined;
    const out: string[] = [];
    for (let i = 0; i < bounds.length; i += 2) out.push(frame.toString('latin1', bounds[i], bounds[i + 1]));
    return out;
  };
  test.each([
    ['bulks and nulls', '*4\r\n$1\r\nx\r\n$-1\r\n$0\r\n\r\n$7\r\n\r\n$-1\r\n\r\n', ['$1\r\nx\r\n', '$-1\r\n', '$0\r\n\r\n', '$7\r\n\r\n$-1\r\n\r\n']],
    ['the empty array', '*0\r\n', []],
    ['other types, cut by the framer', '*3\r\n:1\r\n*2\r\n+a\r\n$1\r\nb\r\n_\r\n', [':1\r\n', '*2\r\n+a\r\n$1\r\nb\r\n', '_\r\n']],
    ['bulks, then other types', '*3\r\n$1\r\nx\r\n:5\r\n$2\r\nyz\r\n', ['$1\r\nx\r\n', ':5\r\n', '$2\r\nyz\r\n']],
  ])('%s', (_what, frame, elements) => {
    expect(elementsOf(raw(frame))).toEqual(elements);
  });

  test('not an array: null', () => {
    expect(arrayElementBounds(raw('-ERR no\r\n'))).toBeNull();
    expect(arrayElementBounds(raw('*-1\r\n'))).toBeNull();
  });

  test('an array cut short: an error, not wrong bounds', () => {
    expect(() => arrayElementBounds(raw('*2\r\n:1\r\n'))).toThrow(ReplyFramingError);
  });
});
