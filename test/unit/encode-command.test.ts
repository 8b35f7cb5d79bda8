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
