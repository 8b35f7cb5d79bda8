// encode.command: a request as RESP, as the proxy builds it for split parts, fan-outs and its own
// requests. Checked against the plain encoding, for strings, buffers and both mixed.
import * as encode from '../../proxy/resp/encode';

function reference(args: readonly (Buffer | string)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const b = typeof a === 'string' ? Buffer.from(a, 'utf8') : a;
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

describe('encode.command', () => {
  const cases: Record<string, (Buffer | string)[]> = {
    'strings only': ['SET', 'key', 'value'],
    'buffers only': [Buffer.from('GET'), Buffer.from('k')],
    'mixed, strings after buffers': [Buffer.from('COMMAND'), 'GETKEYS', Buffer.from('SET'), 'k', 'v'],
    'empty arguments': ['ECHO', '', Buffer.alloc(0)],
    'no arguments at all': [],
    'multi-byte text (length in bytes)': ['SET', 'clé', 'π€😀'],
    'binary bytes, CR and LF inside': [Buffer.from('SET'), Buffer.from([0, 13, 10, 255, 36, 42])],
    'arguments of 32, 33 and 100,000 bytes': ['MSET', 'a'.repeat(32), Buffer.alloc(33, 7), 'z', Buffer.alloc(100_000, 120)],
    'arguments of 64 and 65 bytes (either side of the loop copy)': ['SET', Buffer.alloc(64, 1), 'b'.repeat(65)],
    'ten or more arguments (two-digit count)': Array.from({ length: 12 }, (_, i) => `a${i}`),
    'lengths either side of 10, 100 and 1,000 (one to four digits)': ['SET', ...[9, 10, 11, 99, 100, 101, 999, 1000, 1001].map((n) => Buffer.alloc(n, 97))],
    '100 or more arguments (three-digit count)': Array.from({ length: 100 }, (_, i) => `k${i}`),
  };
  for (const [name, args] of Object.entries(cases)) {
    test(name, () => {
      expect(encode.command(args).equals(reference(args))).toBe(true);
    });
  }

  test('the arguments passed in are left as they were', () => {
    const args: (Buffer | string)[] = ['SET', Buffer.from('k'), 'v'];
    encode.command(args);
    expect(args[0]).toBe('SET');
    expect(args[2]).toBe('v');
  });
});

describe('encode.commandOfKeys', () => {
  test('is encode.command of the first argument and the picked keys (and values), in the order given', () => {
    const args = ['MSET', 'k0', 'v'.repeat(9), 'k1', '', 'k2', 'x'.repeat(120), 'k3', 'y'.repeat(100_000)].map((a) => Buffer.from(a));
    const positions = [1, 3, 5, 7];
    for (const keyIndexes of [[0], [2, 0], [0, 1, 2, 3], [3, 1]]) {
      const picked = keyIndexes.flatMap((k) => [args[positions[k]], args[positions[k] + 1]]);
      expect(encode.commandOfKeys(Buffer.from('SET'), args, positions, 2, keyIndexes).equals(reference(['SET', ...picked]))).toBe(true);
    }
    const mget = ['MGET', ...Array.from({ length: 12 }, (_, i) => `key:${i}`)].map((a) => Buffer.from(a));
    const all = Array.from({ length: 12 }, (_, i) => i);
    expect(encode.commandOfKeys(mget[0], mget, all.map((i) => i + 1), 1, all).equals(reference(mget))).toBe(true);
  });
});
