// Key positions from the command table's key specs (Redis 7.0 getKeysUsingKeySpecs), on the built-in
// fallback table recorded from Redis 7.0.
import { arityMismatch, keyPositions, parseInteger, resolveSubcommand } from '../../proxy/commands/keys';
import { CommandInfo, CommandTable } from '../../proxy/commands/table';
import fallback from '../../proxy/commands/fallback-table.json';

const table = CommandTable.fallback();

function bufs(line: string): Buffer[] {
  return line.split(' ').map((s) => Buffer.from(s));
}

/** The command (or subcommand) a request names, as the dispatcher resolves it. */
function infoFor(args: Buffer[]): CommandInfo {
  const top = table.lookup(args[0]);
  if (top === undefined) throw new Error(`no command ${args[0].toString()} in the fallback table`);
  const sub = resolveSubcommand(top, args);
  if (sub === null || Buffer.isBuffer(sub)) throw new Error(`no subcommand for ${args.map(String).join(' ')}`);
  return sub;
}

function positions(line: string): number[] | null {
  const args = bufs(line);
  return keyPositions(infoFor(args), args);
}

describe('the fallback table', () => {
  test('is recorded from Redis 7.0: a full command set, with key specs', () => {
    expect(table.source).toBe('fallback');
    expect(table.size).toBe(240);
    const get = table.get('get') as CommandInfo;
    expect(get).toMatchObject({ name: 'get', arity: 2, firstKey: 1, lastKey: 1, keyStep: 1, needsGetKeys: false, subcommands: null });
    expect(get.keySpecs).toEqual([
      { begin: { index: 1 }, find: { kind: 'range', lastKey: 0, keyStep: 1, limit: 0 }, incomplete: false, notKey: false, acl: 1, variableFlags: false },
    ]);
    expect([...get.flags].sort()).toEqual(['fast', 'readonly']);
  });

  test.each(['GET', 'get', 'Get', 'gEt'])('lookup(%s) folds case', (name) => {
    expect(table.lookup(Buffer.from(name))?.name).toBe('get');
  });

  test('unknown commands are undefined', () => {
    expect(table.lookup(Buffer.from('NOSUCHCOMMAND'))).toBeUndefined();
    expect(table.get('nosuchcommand')).toBeUndefined();
  });
});

describe('keyPositions', () => {
  test.each<[string, number[] | null]>([
    ['GET k', [1]],
    ['get k', [1]],
    ['SET k v', [1]],
    ['SET k v EX 10 NX GET', [1]],
    ['SET k v KEEPTTL XX', [1]],
    ['MSET a 1 b 2 c 3', [1, 3, 5]],
    ['MSETNX a 1 b 2', [1, 3]],
    ['MGET a', [1]],
    ['MGET a b c', [1, 2, 3]],
    ['DEL a', [1]],
    ['DEL a b c d', [1, 2, 3, 4]],
    ['EXISTS a b', [1, 2]],
    ['EVAL s 0', []],
    ['EVAL s 0 a1 a2', []],
    ['EVAL s 2 k1 k2', [3, 4]],
    ['EVAL s 2 k1 k2 a1 a2', [3, 4]],
    ['EVAL_RO s 1 k a', [3]],
    ['EVALSHA sha 1 k', [3]],
    ['EVALSHA sha 2 k1 k2 a', [3, 4]],
    ['EVALSHA_RO sha 0', []],
    ['FCALL f 1 k a', [3]],
    ['FCALL f 0 a', []],
    ['FCALL_RO f 2 k1 k2', [3, 4]],
    ['ZUNIONSTORE dst 2 a b WEIGHTS 1 2', [1, 3, 4]],
    ['ZINTERSTORE dst 1 a', [1, 3]],
    ['ZUNION 2 a b', [2, 3]],
    ['ZINTERCARD 2 a b', [2, 3]],
    ['ZINTERCARD 3 a b c LIMIT 10', [2, 3, 4]],
    ['ZDIFF 2 a b WITHSCORES', [2, 3]],
    ['LMPOP 2 a b LEFT', [2, 3]],
    ['LMPOP 1 a RIGHT COUNT 2', [2]],
    ['BLMPOP 0 2 a b LEFT', [3, 4]],
    ['BLMPOP 1.5 1 a LEFT COUNT 3', [3]],
    ['ZMPOP 2 a b MIN', [2, 3]],
    ['SINTERCARD 2 a b', [2, 3]],
    ['XREAD STREAMS s 0', [2]],
    ['XREAD COUNT 1 STREAMS s1 s2 0 0', [4, 5]],
    ['XREAD COUNT 1 BLOCK 0 STREAMS s1 s2 s3 0 0 0', [6, 7, 8]],
    ['XREADGROUP GROUP g c STREAMS s 0', [5]],
    ['XREADGROUP GROUP g c COUNT 1 STREAMS s1 s2 > >', [7, 8]],
    ['GEORADIUS k 0 0 10 km', [1]],
    ['GEORADIUS k 0 0 10 km STORE dst', [1, 7]],
    ['GEORADIUS k 0 0 10 km STOREDIST dst', [1, 7]],
    ['GEORADIUSBYMEMBER k m 10 km STORE dst', [1, 6]],
    ['OBJECT ENCODING k', [2]],
    ['object encoding k', [2]],
    ['OBJECT FREQ k', [2]],
    ['OBJECT HELP', []],
    ['XINFO STREAM k', [2]],
    ['XINFO STREAM k FULL COUNT 10', [2]],
    ['XINFO GROUPS k', [2]],
    ['XINFO CONSUMERS k g', [2]],
    ['MEMORY USAGE k', [2]],
    ['MEMORY USAGE k SAMPLES 5', [2]],
    ['BITOP AND dst a b', [2, 3, 4]],
    ['BITOP NOT dst a', [2, 3]],
    ['SINTERSTORE dst a b', [1, 2, 3]],
    ['SUNIONSTORE dst a', [1, 2]],
    ['SMOVE src dst m', [1, 2]],
    ['RENAME a b', [1, 2]],
    ['RENAMENX a b', [1, 2]],
    ['COPY a b', [1, 2]],
    ['COPY a b REPLACE', [1, 2]],
    ['LMOVE a b LEFT RIGHT', [1, 2]],
    ['RPOPLPUSH a b', [1, 2]],
    ['BLPOP a 0', [1]],
    ['BLPOP a b 0', [1, 2]],
    ['BRPOP a b c 1.5', [1, 2, 3]],
    ['BZPOPMIN a b 0', [1, 2]],
    ['PFMERGE dst a b', [1, 2, 3]],
    ['PING', []],
    ['DBSIZE', []],
    ['PUBLISH ch msg', []],
    ['SORT k', null],
    ['SORT k BY w_* GET o_* STORE dst', null],
    ['SORT_RO k', null],
    ['MIGRATE host 6379 k 0 1000', null],
    ['MIGRATE host 6379 "" 0 1000 KEYS a b', null],
  ])('%s -> %j', (line, expected) => {
    expect(positions(line)).toEqual(expected);
  });

  test.each<[string, string]>([
    ['EVAL numkeys larger than the arguments', 'EVAL s 3 k1 k2'],
    ['EVAL numkeys negative', 'EVAL s -1 k1'],
    ['EVAL numkeys not a number', 'EVAL s abc k1'],
    ['EVAL numkeys with junk', 'EVAL s 1x k1'],
    ['EVAL numkeys with a leading zero', 'EVAL s 01 k1'],
    ['EVAL numkeys with a plus sign', 'EVAL s +1 k1'],
    ['EVAL numkeys -0', 'EVAL s -0 k1'],
    ['EVAL numkeys absent', 'EVAL s'],
    ['EVALSHA numkeys larger than the arguments', 'EVALSHA sha 2 k'],
    ['FCALL numkeys not a number', 'FCALL f x k'],
    ['ZUNIONSTORE numkeys larger than the arguments', 'ZUNIONSTORE dst 3 a b'],
    ['ZINTERCARD numkeys 0', 'ZINTERCARD 0'],
    ['LMPOP numkeys not a number', 'LMPOP x a LEFT'],
    ['BLMPOP numkeys larger than the arguments', 'BLMPOP 0 5 a LEFT'],
    ['GET without its key', 'GET'],
    ['RENAME with one key', 'RENAME a'],
  ])('malformed: %s (%s) -> []', (_name, line) => {
    expect(positions(line)).toEqual([]);
  });

  test('a one-key command shares one frozen list per key index, the same the acl path computes', () => {
    const first = positions('SET a 1');
    expect(first).toEqual([1]);
    expect(positions('GET b')).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    const args = bufs('HSET h f v');
    expect(keyPositions(infoFor(args), args)).toEqual(keyPositions(infoFor(args), args, []));
    expect(positions('GET')).toEqual([]); // fewer arguments than the key's index
  });

  test('XREAD without STREAMS names no keys', () => {
    expect(positions('XREAD COUNT 1')).toEqual([]);
  });

  // Every command and subcommand of the table, on a long request of "1"s (so numkeys parse as 1):
  // null exactly when the table says only the node can tell; otherwise distinct argument indexes.
  const everyCommand = (fallback as unknown as unknown[][]).flatMap((e) => {
    const info = table.get(String(e[0])) as CommandInfo;
    return [info, ...(info.subcommands === null ? [] : [...info.subcommands.values()])].map((c) => [c.name, c] as const);
  });

  test('the table holds every command of the recorded reply, subcommands included', () => {
    expect(everyCommand.length).toBeGreaterThan(300);
    expect(new Set(everyCommand.map(([name]) => name)).size).toBe(everyCommand.length);
  });

  test.each(everyCommand)('%s: positions are distinct argument indexes', (name, info) => {
    const argc = Math.max(Math.abs(info.arity), 12);
    const args = Array.from({ length: argc }, (_, i) => Buffer.from(i === 0 ? name.split('|')[0] : '1'));
    const got = keyPositions(info, args);
    if (info.needsGetKeys) {
      expect(got).toBeNull();
      return;
    }
    expect(got).not.toBeNull();
    const ps = got as number[];
    expect(new Set(ps).size).toBe(ps.length);
    for (const p of ps) {
      expect(Number.isInteger(p)).toBe(true);
      expect(p).toBeGreaterThanOrEqual(1);
      expect(p).toBeLessThan(argc);
    }
  });

  test.each(['sort', 'sort_ro', 'migrate'])('%s needs COMMAND GETKEYS', (name) => {
    expect(table.get(name)?.needsGetKeys).toBe(true);
  });

  test.each(['get', 'eval', 'xread', 'georadius', 'zunionstore', 'blmpop'])('%s does not need COMMAND GETKEYS', (name) => {
    expect(table.get(name)?.needsGetKeys).toBe(false);
  });
});

describe('resolveSubcommand', () => {
  test.each<[string, string]>([
    ['OBJECT ENCODING k', 'object|encoding'],
    ['object Encoding k', 'object|encoding'],
    ['XINFO STREAM k', 'xinfo|stream'],
    ['MEMORY USAGE k', 'memory|usage'],
    ['CLIENT SETNAME n', 'client|setname'],
    ['CLUSTER KEYSLOT k', 'cluster|keyslot'],
    ['SCRIPT LOAD s', 'script|load'],
    ['CONFIG GET maxmemory', 'config|get'],
  ])('%s -> %s', (line, name) => {
    expect(infoFor(bufs(line)).name).toBe(name);
  });

  test('a command without subcommands resolves to itself', () => {
    const get = table.get('get') as CommandInfo;
    expect(resolveSubcommand(get, bufs('GET k'))).toBe(get);
  });

  test('an unknown subcommand comes back as its argument', () => {
    const object = table.get('object') as CommandInfo;
    const got = resolveSubcommand(object, bufs('OBJECT NOSUCH k'));
    expect(Buffer.isBuffer(got) ? got.toString() : got).toBe('NOSUCH');
  });

  test('a container without its subcommand gives null', () => {
    expect(resolveSubcommand(table.get('object') as CommandInfo, bufs('OBJECT'))).toBeNull();
  });
});

describe('arityMismatch', () => {
  test.each<[string, number, boolean]>([
    // GET: arity 2, exactly
    ['get', 1, true],
    ['get', 2, false],
    ['get', 3, true],
    // SET: arity -3, at least 3
    ['set', 2, true],
    ['set', 3, false],
    ['set', 7, false],
    // MSET: -3
    ['mset', 3, false],
    ['mset', 2, true],
    // PING: -1
    ['ping', 1, false],
    ['ping', 2, false],
    // EVAL: -3
    ['eval', 2, true],
    ['eval', 3, false],
    // RENAME: 3
    ['rename', 3, false],
    ['rename', 4, true],
    // OBJECT: -2 (the container), OBJECT ENCODING: 3
    ['object', 1, true],
    ['object', 2, false],
  ])('%s with %i arguments -> %s', (name, argc, expected) => {
    expect(arityMismatch(table.get(name) as CommandInfo, argc)).toBe(expected);
  });

  test.each<[string, number, boolean]>([
    ['encoding', 3, false],
    ['encoding', 2, true],
    ['encoding', 4, true],
    ['help', 2, false],
  ])('OBJECT %s with %i arguments -> %s', (sub, argc, expected) => {
    const info = (table.get('object') as CommandInfo).subcommands?.get(sub) as CommandInfo;
    expect(arityMismatch(info, argc)).toBe(expected);
  });
});

describe('parseInteger (Redis string2ll)', () => {
  test.each<[string, number | null]>([
    ['0', 0],
    ['1', 1],
    ['42', 42],
    ['-1', -1],
    ['-42', -42],
    ['2147483648', 2147483648],
    ['9007199254740991', 9007199254740991],
    ['-9007199254740991', -9007199254740991],
    ['', null],
    ['-', null],
    ['+1', null],
    ['01', null],
    ['00', null],
    ['-01', null],
    // string2ll refuses "-0" (after '-' the first digit must be 1-9): `SELECT -0` is an error in Redis.
    ['-0', null],
    [' 1', null],
    ['1 ', null],
    ['1.0', null],
    ['1e3', null],
    ['0x10', null],
    ['abc', null],
    ['１', null],
  ])('%j -> %j', (text, expected) => {
    expect(parseInteger(Buffer.from(text))).toBe(expected);
  });
});

describe('tables without key specs (Redis < 7)', () => {
  // COMMAND entries as Redis 6 sends them: name, arity, flags, first, last, step (no key specs).
  const legacy = CommandTable.fromCommandReply([
    ['get', 2, ['readonly', 'fast'], 1, 1, 1],
    ['mget', -2, ['readonly', 'fast'], 1, -1, 1],
    ['mset', -3, ['write', 'denyoom'], 1, -1, 2],
    ['blpop', -3, ['write', 'noscript'], 1, -2, 1],
    ['ping', -1, ['stale', 'fast'], 0, 0, 0],
    ['eval', -3, ['noscript', 'movablekeys'], 0, 0, 0],
  ]);

  test.each<[string, number[] | null]>([
    ['GET k', [1]],
    ['MGET a b c', [1, 2, 3]],
    ['MSET a 1 b 2', [1, 3]],
    ['BLPOP a b 0', [1, 2]],
    ['PING', []],
    ['EVAL s 1 k', null],
  ])('%s -> %j (first/last/step)', (line, expected) => {
    const args = bufs(line);
    const info = legacy.lookup(args[0]) as CommandInfo;
    expect(info.keySpecs).toEqual([]);
    expect(keyPositions(info, args)).toEqual(expected);
  });

  test('the table says where it came from', () => {
    expect(legacy.source).toBe('backend');
    expect(legacy.size).toBe(6);
  });
});
