// Client-side caching's pure parts: CLIENT TRACKING's state (what is remembered, TRACKINGINFO's
// flags, BCAST prefixes), the bounded key table, and reading a node's invalidate push.

import { ClientTracking, parseTracking, setCaching } from '../../proxy/tracking/tracking-state';
import { KeyTable } from '../../proxy/tracking/key-table';
import { changedKeys } from '../../proxy/backend/change-feed';
import { scriptUse } from '../../proxy/tracking/script-use';
import { readKeysOfCall, scriptReadKeys } from '../../proxy/tracking/script-read-keys';
import { WriteOrder } from '../../proxy/tracking/write-order';
import { maxKeysSet, withMaxKeys } from '../../proxy/tracking/table-limit';
import { CommandTable } from '../../proxy/commands/table';

const args = (...a: string[]): Buffer[] => ['CLIENT', 'TRACKING', ...a].map((s) => Buffer.from(s));
const enabled = (...a: string[]): ClientTracking => {
  const t = new ClientTracking();
  const request = parseTracking(args('on', ...a), () => true, null);
  if (typeof request === 'string') throw new Error(request);
  t.apply(request);
  return t;
};

describe('CLIENT TRACKING state', () => {
  test('default mode remembers every read; OPTIN only after CACHING YES; OPTOUT unless CACHING NO; BCAST none', () => {
    expect(enabled().remembersKeys).toBe(true);
    const optin = enabled('OPTIN');
    expect(optin.remembersKeys).toBe(false);
    expect(setCaching(optin, Buffer.from('yes'))).toBeNull();
    expect(optin.remembersKeys).toBe(true);
    const optout = enabled('OPTOUT');
    expect(optout.remembersKeys).toBe(true);
    expect(setCaching(optout, Buffer.from('no'))).toBeNull();
    expect(optout.remembersKeys).toBe(false);
    expect(enabled('BCAST').remembersKeys).toBe(false);
  });

  test("TRACKINGINFO's flags in Redis's order; BCAST without a prefix tracks the empty one; prefixes sorted", () => {
    const t = enabled('OPTIN', 'NOLOOP');
    setCaching(t, Buffer.from('yes'));
    expect(t.flags()).toEqual(['on', 'optin', 'caching-yes', 'noloop']);
    expect(enabled('BCAST').prefixes.map(String)).toEqual(['']);
    expect(enabled('BCAST', 'PREFIX', 'b', 'PREFIX', 'a').prefixes.map(String)).toEqual(['a', 'b']);
    expect(enabled('BCAST', 'PREFIX', 'user:').prefixOf(Buffer.from('user:1'))?.toString()).toBe('user:');
    expect(enabled('BCAST', 'PREFIX', 'user:').prefixOf(Buffer.from('cart:1'))).toBeNull();
  });

  test('option errors need the current state: switching BCAST or OPTIN/OPTOUT while on, overlapping prefixes', () => {
    expect(parseTracking(args('on'), () => true, enabled('BCAST'))).toMatch(/^ERR You can't switch BCAST mode/);
    expect(parseTracking(args('on', 'OPTOUT'), () => true, enabled('OPTIN'))).toMatch(/^ERR You can't switch OPTIN\/OPTOUT mode/);
    expect(parseTracking(args('on', 'BCAST', 'PREFIX', 'ab'), () => true, enabled('BCAST', 'PREFIX', 'a'))).toBe(
      "ERR Prefix 'ab' overlaps with an existing prefix 'a'. Prefixes for a single client must not overlap.",
    );
    expect(parseTracking(args('on', 'REDIRECT', '7'), () => false, null)).toBe('ERR The client ID you want redirect to does not exist');
    expect(parseTracking(args('off', 'BCAST'), () => true, null)).toMatchObject({ on: false });
  });

  test('NOLOOP: a write stays the client\'s own from its reply slot until it is released', () => {
    const t = enabled('NOLOOP');
    t.armedWrite = ['k'];
    const slot = {} as never;
    t.claimWrite(slot);
    expect(t.ownKeys.get('k')).toBe(1);
    const [feedA, feedB] = [{}, {}];
    // Not answered yet: whatever feed brings k, it may be this write's.
    expect(t.ownChange('k', feedA)).toBe(true);
    const write = t.writeAnswered(slot);
    expect(write?.keys).toEqual(['k']);
    if (write === null) return;
    write.pending = new Set([feedA, feedB]);
    expect(t.ownKeys.get('k')).toBe(1);
    // Feed A passed its PING: what it brings now is another client's change; feed B's may still be this one.
    write.pending.delete(feedA);
    expect(t.ownChange('k', feedA)).toBe(false);
    expect(t.ownChange('k', feedB)).toBe(true);
    expect(t.ownChange('other', feedB)).toBe(false);
    t.releaseWrite(write);
    expect(t.ownKeys.has('k')).toBe(false);
    expect(t.ownChange('k', feedB)).toBe(false);
  });
});

describe('KeyTable', () => {
  test('one client per key without a Set, several with one; an entry is taken whole', () => {
    const table = new KeyTable(0);
    table.add('a', 1);
    table.add('a', 1);
    table.add('b', 1);
    table.add('b', 2);
    expect(table.items).toBe(3);
    expect(table.take('a')).toBe(1);
    expect([...(table.take('b') as Set<number>)]).toEqual([1, 2]);
    expect(table.size).toBe(0);
  });

  test('a read may take it past maxKeys; the oldest key is evicted first, with its clients', () => {
    const table = new KeyTable(2);
    table.add('a', 1);
    table.add('b', 2);
    table.add('a', 3);
    table.add('c', 1);
    expect(table.size).toBe(3);
    expect(table.overLimit).toBe(true);
    expect(table.evictOne()).toEqual(['a', new Set([1, 3])]);
    expect(table.overLimit).toBe(false);
    expect(table.evicted).toBe(1);
    table.maxKeys = 0;
    table.add('d', 1);
    expect(table.overLimit).toBe(false);
  });

  test("drop forgets one client's read of a key", () => {
    const table = new KeyTable(0);
    table.add('k', 1);
    table.add('k', 2);
    expect(table.drop('k', 1)).toBe(true);
    expect(table.drop('k', 1)).toBe(false);
    expect(table.take('k')).toEqual(new Set([2]));
  });
});

describe("a node's invalidate push", () => {
  test('keys, or null for a flush or anything unreadable', () => {
    expect(changedKeys(Buffer.from('>2\r\n$10\r\ninvalidate\r\n*2\r\n$1\r\na\r\n$3\r\nb\rc\r\n'))?.map(String)).toEqual(['a', 'b\rc']);
    expect(changedKeys(Buffer.from('>2\r\n$10\r\ninvalidate\r\n_\r\n'))).toBeNull();
    expect(changedKeys(Buffer.from('>2\r\n$7\r\nmessage\r\n$1\r\nx\r\n'))).toBeNull();
  });
});

describe("a script's text: may it run a read-only command, may it write", () => {
  const table = CommandTable.fallback();
  test.each([
    ["redis.call('set','{t}key3','bar')", false, true],
    ["return redis.call('GET', KEYS[1])", true, false],
    ["redis.pcall(\"incr\", KEYS[1]); return redis.call('object', 'encoding', KEYS[1])", true, true],
    ["redis.log(redis.LOG_WARNING, 'x'); return redis.sha1hex('')", false, false],
    ['return 1', false, false],
  ])('%s', (body, reads, writes) => {
    expect(scriptUse(body, table)).toMatchObject({ reads, writes });
  });
  test.each([
    ['a command name not written out', 'return redis.call(ARGV[1], KEYS[1])'],
    ['a name built from pieces', "return redis.call('g' .. 'et', KEYS[1])"],
    ['the table under another name', "local r = redis; return r.call('get', KEYS[1])"],
    ['globals reached another way', "return _G['red' .. 'is'].call('get', KEYS[1])"],
    ['the debug library', "return debug.getinfo(1)"],
    ['a command the table does not know', "return redis.call('nosuchcommand')"],
  ])('%s: it may do anything', (_what, body) => {
    expect(scriptUse(body, table)).toEqual({ reads: true, writes: true, readKeys: null });
  });
});

describe("a script's text: the keys its read-only calls read (Redis 7.2 and later track those)", () => {
  const table = CommandTable.fallback();
  const read = (body: string): (string | number)[] | null => scriptReadKeys(body, table)?.map((k) => (Buffer.isBuffer(k) ? k.toString() : k)) ?? null;
  test.each([
    ["redis.call('set','{t}key3','bar')", []],
    ["return redis.call('get','{t}other')", ['{t}other']],
    ["redis.call('get', KEYS[1]); return redis.call('set', KEYS[2], 'x')", [0]],
    ["return redis.call('MGET', KEYS[2], \"lit\", KEYS[ 1 ])", [1, 'lit', 0]],
    ["return redis.call('hget', KEYS[1], ARGV[1])", [0]],
    ["return redis.call('object', 'encoding', KEYS[1])", [0]],
    ["return redis.call('zrange', KEYS[1], 0, -1)", [0]],
    ["return redis.pcall('sintercard', 2, KEYS[1], 'b')", [0, 'b']],
    ["redis.call('ping')", []],
  ])('%s', (body, keys) => {
    expect(read(body)).toEqual(keys);
  });
  test.each([
    ['a key from ARGV', 'return redis.call(\'get\', ARGV[1])'],
    ['the declared keys unpacked', 'return redis.call(\'mget\', unpack(KEYS))'],
    ['a key built at run time', "return redis.call('get', 'user:' .. ARGV[1])"],
    ['a count not written out', "return redis.call('sintercard', #KEYS, KEYS[1], KEYS[2])"],
    ['a string with an escape', "return redis.call('get', 'a\\'b')"],
    ['a command name not written out', 'return redis.call(ARGV[1], KEYS[1])'],
  ])('%s: not told by the text', (_what, body) => {
    expect(read(body)).toBeNull();
  });
  test('declared keys taken from the call, none past numkeys', () => {
    const args = ['EVAL', 'body', '2', 'k1', 'k2', 'argv1'].map((a) => Buffer.from(a));
    expect(readKeysOfCall([1, Buffer.from('lit'), 0, 2], args).map(String)).toEqual(['k2', 'lit', 'k1']);
  });
});

describe('WriteOrder', () => {
  test("a batch in the order its keys were written; keys never seen written after, in the batch's order", () => {
    const order = new WriteOrder();
    for (const k of ['k2', 'k3', 'k1']) order.note(Buffer.from(k));
    const batch = ['a', 'k1', 'k2', 'k3', 'z'].map((k) => Buffer.from(k));
    expect(order.sort(batch).map(String)).toEqual(['k2', 'k3', 'k1', 'a', 'z']);
    // Used up: the same keys changed again by something else come in the batch's order.
    expect(order.sort(batch.slice(1, 4)).map(String)).toEqual(['k1', 'k2', 'k3']);
  });
});

describe('tracking-table-max-keys through CONFIG', () => {
  const b = (...a: string[]): Buffer[] => a.map((x) => Buffer.from(x));
  test('CONFIG SET: the value when valid, else null', () => {
    expect(maxKeysSet(b('CONFIG', 'SET', 'maxmemory', '1mb', 'Tracking-Table-Max-Keys', '10'))).toBe(10);
    expect(maxKeysSet(b('CONFIG', 'SET', 'tracking-table-max-keys', '-1'))).toBeNull();
    expect(maxKeysSet(b('CONFIG', 'SET', 'tracking-table-max-keys', '1k'))).toBeNull();
    expect(maxKeysSet(b('CONFIG', 'SET', 'maxmemory', '1mb'))).toBeNull();
  });
  test("CONFIG GET: the node's reply with the proxy's value, RESP2 and RESP3", () => {
    const pairs = '$9\r\nmaxmemory\r\n$1\r\n0\r\n$23\r\ntracking-table-max-keys\r\n$7\r\n1000000\r\n';
    expect(withMaxKeys(Buffer.from(`*4\r\n${pairs}`), 5).toString()).toBe(`*4\r\n${pairs.replace('$7\r\n1000000', '$1\r\n5')}`);
    expect(withMaxKeys(Buffer.from(`%2\r\n${pairs}`), 5).toString()).toBe(`%2\r\n${pairs.replace('$7\r\n1000000', '$1\r\n5')}`);
    expect(withMaxKeys(Buffer.from('*0\r\n'), 5).toString()).toBe('*0\r\n');
  });
});
