// The proxy's script store (bounded, LRU, preloaded scripts pinned) and the numkeys check of EVAL*.
import { createHash } from 'node:crypto';
import { ScriptStore, sha1 } from '../../proxy/scripts/store';
import { numkeysError } from '../../proxy/dispatch/script-call';

const b = (s: string): Buffer => Buffer.from(s);

describe('ScriptStore', () => {
  test('add returns the lower-case SHA1 and get finds it in any case', () => {
    const store = new ScriptStore(1000);
    const sha = store.add(b('return 1'));
    expect(sha).toBe(createHash('sha1').update('return 1').digest('hex'));
    expect(store.get(sha.toUpperCase())?.toString()).toBe('return 1');
    expect(store.get(b(sha))?.toString()).toBe('return 1');
    expect(store.get('0'.repeat(40))).toBeUndefined();
  });

  test('stays within maxBytes, forgetting the least recently used first', () => {
    const store = new ScriptStore(30);
    const a = store.add(b('return 1 -- aaaa')); // 16 bytes
    const c = store.add(b('return 2 -- cccc'));
    expect(store.bytes).toBeLessThanOrEqual(30);
    expect(store.get(a)).toBeUndefined();
    expect(store.get(c)).toBeDefined();
    expect(store.evictions).toBe(1);
    const d = store.add(b('return 3 -- dd'));
    store.get(c); // c is now the most recently used
    store.add(b('return 4'));
    expect(store.get(d)).toBeUndefined();
    expect(store.get(c)).toBeDefined();
  });

  test('preloaded (pinned) scripts are never evicted nor forgotten by SCRIPT FLUSH', () => {
    const store = new ScriptStore(20);
    const pinned = store.add(b('return "preloaded script body"'), true);
    const plain = store.add(b('return 5'));
    expect(store.get(pinned)).toBeDefined();
    expect(store.get(plain)).toBeUndefined(); // over the bound: only unpinned bodies go
    const again = store.add(b('return 6'), false);
    store.forgetUnpinned();
    expect(store.get(again)).toBeUndefined();
    expect(store.pinned().map(([sha]) => sha)).toEqual([pinned]);
  });

  test('a body larger than the whole store is not kept; the same body twice is stored once', () => {
    const store = new ScriptStore(10);
    store.add(b('return "far too long"'));
    expect(store.size).toBe(0);
    const big = new ScriptStore(100);
    big.add(b('return 1'));
    big.add(b('return 1'));
    expect(big.size).toBe(1);
    expect(big.bytes).toBe(8);
    expect(sha1(b(''))).toBe('da39a3ee5e6b4b0d3255bfef95601890afd80709');
  });
});

describe('numkeysError (EVAL/EVALSHA, Redis 7 texts)', () => {
  test.each<[string[], string | null]>([
    [['EVAL', 's', '0'], null],
    [['EVAL', 's', '2', 'a', 'b'], null],
    [['EVAL', 's', '1', 'a', 'arg'], null],
    [['EVAL', 's', '3', 'a', 'b'], "ERR Number of keys can't be greater than number of args"],
    [['EVAL', 's', '-1'], "ERR Number of keys can't be negative"],
    [['EVAL', 's', 'x'], 'ERR value is not an integer or out of range'],
    [['EVAL', 's', '01'], 'ERR value is not an integer or out of range'],
    [['EVAL', 's', ' 1'], 'ERR value is not an integer or out of range'],
    [['EVAL', 's', '99999999999999999999'], 'ERR value is not an integer or out of range'],
    [['EVAL', 's', '9223372036854775807'], "ERR Number of keys can't be greater than number of args"],
    [['EVAL', 's', '9223372036854775808'], 'ERR value is not an integer or out of range'],
    [['EVAL', 's', '-9223372036854775808'], "ERR Number of keys can't be negative"],
  ])('%j -> %s', (args, expected) => {
    expect(numkeysError(args.map(b))).toBe(expected);
  });
});
