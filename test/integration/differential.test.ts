// The differential test: every command the back end's COMMAND DOCS lists, and a corpus of tricky
// requests, sent to one Redis (a single-node Redis Cluster owning every slot: what a perfect proxy
// would look like to its client) and through slotproxy in front of 3 masters; replies compared byte
// for byte. A difference must be listed in the one table of docs/compatibility.md's "Commands that
// answer differently" section, and a listed row must still differ, so the table stays true.

import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { sendCommand } from '../../cmd/sandbox/resp-client';
import { useProxy } from '../helpers/proxy';
import { Exchange, RawRequest, exchange, splitReplies } from '../helpers/raw-exchange';
import { Case, FIXTURES, FIXTURE_KEYS, LIBRARY, SCRIPT, SCRIPT_SHA1, casesFor, commandSpecs } from '../helpers/command-cases';
import { keySlot } from '../../sharding/slot';
import { SERVER, redisAtLeast } from '../helpers/server-version';

// A long node timeout: PFSELFTEST holds its master for a while, on a loaded host past the default
// 2 s, and then the master's replica took over and the next case's FLUSHALL met READONLY (seen twice
// on the loaded 2-core host). No case here wants a failover.
const { proxy } = useProxy({}, { nodeTimeoutMs: 30_000 });
/** See COMPARED_BY_SHAPE. */
const CALIBRATE = process.env.CALIBRATE === '1';
let reference: RedisCluster | undefined;
let reference2: RedisCluster | undefined;

beforeAll(async () => {
  reference = await RedisCluster.start({ masters: 1, replicasPerMaster: 0 });
  if (CALIBRATE) reference2 = await RedisCluster.start({ masters: 1, replicasPerMaster: 0 });
}, 60_000);
afterAll(async () => {
  await reference?.stop();
  await reference2?.stop();
}, 30_000);

const referencePort = (): number => {
  if (reference === undefined) throw new Error('the reference node did not start');
  return reference.masters[0].port;
};

/**
 * Commands whose replies differ between any two servers, whatever stands in front of them: their
 * replies are compared by shape (the type of each reply, an array's length, the text of errors and
 * simple strings), not byte for byte. `CALIBRATE=1 npx jest <this file>` compares two reference
 * nodes byte for byte instead of the reference and the proxy: what differs there belongs here.
 */
const COMPARED_BY_SHAPE = new Set([
  'TIME', 'LASTSAVE', 'OBJECT IDLETIME', // the clock
  'INFO', 'MEMORY STATS', 'MEMORY MALLOC-STATS', 'MEMORY DOCTOR', // the process's counters and allocator
  'LATENCY HISTOGRAM', 'SLOWLOG GET', 'SLOWLOG LEN', // what each server has run so far
  'RANDOMKEY', 'SPOP', 'SRANDMEMBER', 'HRANDFIELD', 'ZRANDMEMBER', 'ACL GENPASS', // random
  'CLIENT ID', 'CLIENT LIST', 'CLIENT INFO', 'HELLO', // connection ids, addresses, ages
  'CLUSTER MYID', 'CLUSTER NODES', 'CLUSTER SHARDS', 'CLUSTER SLOTS', // node ids and ports
  'KEYS', 'SCAN', 'COMMAND', 'COMMAND LIST', 'COMMAND INFO', 'COMMAND DOCS', // hash-table order, seeded at random
  'WAIT', // the number of replicas: the reference has none, the proxy's cluster one per master
]);
/**
 * Compared by the type of each reply alone: how many entries they hold depends on how long each
 * server took to run the earlier cases (SLOWLOG keeps the commands slower than 10 ms, which on a
 * loaded machine may be any, on either side).
 */
const COMPARED_BY_TYPE = new Set(['SLOWLOG GET']);
const sha1 = (text: string): string => crypto.createHash('sha1').update(text).digest('hex');

interface CorpusCase extends Case {
  /** Compared by shape (see COMPARED_BY_SHAPE). */
  byShape?: boolean;
  /** A channel another client of the same server subscribes to while the case runs. */
  subscriber?: string;
}

const c = (command: string, kind: string, requests: RawRequest[], extra: Partial<CorpusCase> = {}): CorpusCase => ({
  command,
  kind,
  requests: requests as (string[] | string)[],
  ...extra,
});
const K = FIXTURE_KEYS;
/** The slot of every fixture key. */
const FIXTURE_SLOT = String(keySlot(Buffer.from('t')));
/**
 * Redis 7.4 (and Valkey 8) keep a dictionary per slot: GETKEYSINSLOT lists a slot's keys in its
 * hash-table order, seeded at random per process, where 7.0 lists them newest first.
 */
const SLOT_KEYS_IN_HASH_ORDER = redisAtLeast(7, 4) || SERVER.flavor === 'valkey';

/** Tricky requests, each a connection's worth, run after the same fixtures as the generated cases. */
const CORPUS: CorpusCase[] = [
  c('PING', '*0 then PING', ['*0\r\n', ['PING']]),
  c('PING', '*-10 then PING', ['*-10\r\n', ['PING']]),
  c('PING', 'PING with 3 args', [['PING', 'a', 'b', 'c'], ['PING', 'a']]),
  c('PING', 'inline PING and empty lines', ['PING\r\n', '\r\n\r\n', 'PING hello\r\n']),
  c('SET', 'inline with quotes', ['SET "{t}a b" "c\\td"\r\n', ['GET', '{t}a b']]),
  c('SET', 'inline unbalanced quotes', ['SET "{t}a\r\n', ['PING']]),
  c('PING', 'bad multibulk length', ['*abc\r\n', ['PING']]),
  c('PING', 'bad bulk length', ['*1\r\n$x\r\n', ['PING']]),
  c('PING', 'bulk where the length is wrong', ['*1\r\n$3\r\nPINGX\r\n', ['PING']]),
  c('NOPE', 'unknown command', [['NOPE', 'a', 'b'], ['NOPE']]),
  c('NOPE', 'empty command name', ['*1\r\n$0\r\n\r\n', ['PING']]),
  c('GET', 'lower and mixed case names', [['get', K.string], ['GeT', K.string], ['config', 'nope']]),
  c('ECHO', 'binary argument', [['ECHO', 'a\x00b\r\n\xff'], ['SET', '{t}\x00', '\x00'], ['GET', '{t}\x00']]),
  c('SELECT', 'SELECT 1', [['SELECT', '1'], ['SELECT', '0'], ['GET', K.string]]),
  c('HELLO', 'HELLO 4', [['HELLO', '4'], ['HELLO', '2', 'SETNAME', 'a b']]),
  // HELLO's own reply holds the connection id, so it is skipped; what follows is RESP3.
  c('HELLO', 'RESP3 replies', [
    ['CLIENT', 'REPLY', 'SKIP'], ['HELLO', '3'], ['GET', K.string], ['HGETALL', K.hash], ['SMEMBERS', K.set],
    ['ZRANGE', K.zset, '0', '-1', 'WITHSCORES'], ['ZSCORE', K.zset, 'a'], ['GET', '{t}missing'], ['INCRBYFLOAT', K.string, '0.5'],
    ['XINFO', 'GROUPS', K.stream], ['NOPE'],
  ]),
  c('EXEC', 'EXEC with args', [['MULTI'], ['SET', '{t}k', 'v'], ['EXEC', 'x'], ['EXEC']]),
  c('MULTI', 'unknown command in MULTI', [['MULTI'], ['NOPE'], ['SET', '{t}k', 'v'], ['EXEC'], ['GET', '{t}k']]),
  c('MULTI', 'wrong arity in MULTI', [['MULTI'], ['GET'], ['EXEC']]),
  c('MULTI', 'runtime error in MULTI', [['MULTI'], ['INCR', K.list], ['SET', '{t}k', 'v'], ['EXEC'], ['GET', '{t}k']]),
  c('MULTI', 'nested MULTI', [['MULTI'], ['MULTI'], ['PING'], ['EXEC']]),
  c('MULTI', 'keys of two slots in MULTI: QUEUED, CROSSSLOT at EXEC', [['MULTI'], ['SET', '{t}k', 'v'], ['SET', '{u}k', 'v'], ['GET', '{v}k'], ['EXEC'], ['GET', '{t}k'], ['GET', '{u}k'], ['DISCARD']]),
  c('MULTI', 'one command of two slots in MULTI: CROSSSLOT at once', [['MULTI'], ['SET', '{t}k', 'v'], ['MGET', '{t}k', '{u}k'], ['EXEC'], ['GET', '{t}k']]),
  c('MULTI', 'two slots and an error in MULTI: EXECABORT', [['MULTI'], ['SET', '{t}k', 'v'], ['GET'], ['SET', '{u}k', 'v'], ['EXEC'], ['GET', '{t}k']]),
  c('MULTI', 'keyless commands in MULTI', [['MULTI'], ['PING'], ['ECHO', 'a'], ['GET', K.string], ['EXEC']]),
  c('DISCARD', 'DISCARD without and with MULTI', [['DISCARD'], ['MULTI'], ['SET', '{t}k', 'v'], ['DISCARD'], ['GET', '{t}k']]),
  c('WATCH', 'WATCH/EXEC untouched', [['WATCH', K.string], ['MULTI'], ['INCR', K.string], ['EXEC']]),
  c('WATCH', 'WATCH/EXEC touched by the same client', [['WATCH', K.string], ['SET', K.string, '1'], ['MULTI'], ['INCR', K.string], ['EXEC']]),
  c('WATCH', 'WATCH inside MULTI', [['MULTI'], ['WATCH', K.string], ['EXEC']]),
  c('WATCH', 'WATCH then DISCARD in one pipeline', [['WATCH', K.string], ['MULTI'], ['DISCARD'], ['GET', K.string]]),
  c('WATCH', 'WATCH then an aborted EXEC', [['WATCH', K.string], ['MULTI'], ['NOPE'], ['EXEC'], ['GET', K.string]]),
  c('WATCH', 'WATCH then RESET', [['WATCH', K.string], ['RESET'], ['WATCH', K.string], ['UNWATCH'], ['PING']]),
  c('EVAL', 'numkeys 0', [['EVAL', 'return {KEYS[1], ARGV[1], ARGV[2]}', '0', 'a', 'b']]),
  c('EVAL', 'bad numkeys', [['EVAL', SCRIPT, '-1'], ['EVAL', SCRIPT, '2', '{t}a'], ['EVAL', SCRIPT, 'x'], ['EVAL', SCRIPT]]),
  c('EVAL', 'script reads its key', [['EVAL', "return redis.call('GET', KEYS[1])", '1', K.string]]),
  c('EVAL', 'script errors', [
    ['EVAL', "return redis.call('NOPE')", '0'], ['EVAL', "return redis.error_reply('mine')", '0'], ['EVAL', 'syntax error here', '0'],
    ['EVAL', "return redis.call('INCR', KEYS[1])", '1', K.list],
  ]),
  c('SCRIPT EXISTS', 'SCRIPT EXISTS after EVAL', [['EVAL', SCRIPT, '0'], ['SCRIPT', 'EXISTS', SCRIPT_SHA1, sha1('nope')]]),
  c('EVALSHA', 'SCRIPT LOAD then EVALSHA', [['EVALSHA', sha1('return 2'), '0'], ['SCRIPT', 'LOAD', 'return 2'], ['EVALSHA', sha1('return 2'), '0']]),
  c('FCALL', 'FUNCTION LOAD then FCALL', [['FUNCTION', 'LOAD', LIBRARY], ['FCALL', 'f', '0'], ['FCALL_RO', 'f', '0'], ['FUNCTION', 'LIST']]),
  c('PUBLISH', 'PUBLISH with a subscriber', [['PUBLISH', 'news', 'hi'], ['PUBLISH', 'nobody', 'hi']], { subscriber: 'news' }),
  // UNSUBSCRIBE with no argument names what is left in the server's hash-table order (seeded at
  // random per process), so one channel is left for it.
  c('SUBSCRIBE', 'commands while subscribed', [
    ['SUBSCRIBE', 'a', 'b'], ['PING'], ['PING', 'x'], ['GET', K.string], ['UNSUBSCRIBE', 'b'], ['UNSUBSCRIBE'], ['PING'], ['GET', K.string],
  ]),
  c('RESET', 'RESET in MULTI and while subscribed', [['MULTI'], ['RESET'], ['SUBSCRIBE', 'a'], ['RESET'], ['PING']]),
  // Confirmations count what the client has in request order, whichever node answers first.
  c('SUBSCRIBE', 'subscription counts in request order', [
    ['SUBSCRIBE', 'a', 'a', 'b'], ['UNSUBSCRIBE', 'x'], ['SSUBSCRIBE', 's1'], ['SSUBSCRIBE', 's2'], ['SSUBSCRIBE', 's3'], ['SSUBSCRIBE', 's4'],
    ['SUNSUBSCRIBE', 'zz'], ['SUNSUBSCRIBE', 's1', 's2'], ['UNSUBSCRIBE', 'b', 'x', 'a'], ['PSUBSCRIBE', 'p*'], ['PUNSUBSCRIBE', 'q', 'p*'],
    ['SUNSUBSCRIBE', 's4', 's4'], ['PUNSUBSCRIBE'], ['PING'], ['PING', 'a', 'b'],
  ]),
  c('SUBSCRIBE', 'subscribed mode ends in request order', [
    ['SUBSCRIBE', 'a'], ['UNSUBSCRIBE', 'a'], ['GET', K.string], ['SSUBSCRIBE', 's1'], ['SUNSUBSCRIBE', 's1'], ['PING'],
    ['PSUBSCRIBE', '__key*'], ['RESET'], ['GET', K.string],
  ]),
  // HELLO's own replies hold the connection id, so they are skipped.
  c('SUBSCRIBE', 'RESP3 while subscribed', [
    ['CLIENT', 'REPLY', 'SKIP'], ['HELLO', '3'], ['SUBSCRIBE', 'a'], ['PING'], ['GET', K.string], ['SSUBSCRIBE', 's1'], ['SUNSUBSCRIBE', 's1', 's2'],
    ['CLIENT', 'REPLY', 'SKIP'], ['HELLO', '2'], ['PING'], ['PSUBSCRIBE', '__keyspace@0__:*'], ['RESET'], ['PING'],
  ]),
  // GETKEYSINSLOT lists a slot's keys newest first: the same order on both sides.
  c('CLUSTER COUNTKEYSINSLOT', 'the slot of the fixtures', [
    ['CLUSTER', 'COUNTKEYSINSLOT', FIXTURE_SLOT], ['CLUSTER', 'GETKEYSINSLOT', FIXTURE_SLOT, '100'], ['CLUSTER', 'GETKEYSINSLOT', FIXTURE_SLOT, '2'],
    ['CLUSTER', 'COUNTKEYSINSLOT', '16383'], ['CLUSTER', 'GETKEYSINSLOT', '16383', '0'], ['CLUSTER', 'GETKEYSINSLOT', '-1', '-1'],
  ], { byShape: SLOT_KEYS_IN_HASH_ORDER }),
  c('CLUSTER COUNTKEYSINSLOT', 'COUNTKEYSINSLOT and GETKEYSINSLOT in MULTI', [
    ['MULTI'], ['SET', '{t}new', '1'], ['CLUSTER', 'COUNTKEYSINSLOT', FIXTURE_SLOT], ['CLUSTER', 'GETKEYSINSLOT', FIXTURE_SLOT, '1'], ['EXEC'],
  ], { byShape: SLOT_KEYS_IN_HASH_ORDER }),
  c('MOVE', 'MOVE and SWAPDB in MULTI', [['MULTI'], ['MOVE', K.string, '1'], ['SWAPDB', '0', '1'], ['GET', K.string], ['EXEC'], ['GET', K.string]]),
  c('CONFIG GET', 'CONFIG GET maxmemory', [['CONFIG', 'GET', 'maxmemory']]),
  c('RANDOMKEY', 'RANDOMKEY on an empty db', [['FLUSHALL'], ['RANDOMKEY']]),
  c('RANDOMKEY', 'RANDOMKEY with one key', [['FLUSHALL'], ['SET', '{t}only', '1'], ['RANDOMKEY']]),
  c('DBSIZE', 'DBSIZE', [['DBSIZE'], ['FLUSHALL'], ['DBSIZE']]),
  c('MEMORY USAGE', 'MEMORY USAGE of a missing key', [['MEMORY', 'USAGE', '{t}missing']]),
  c('OBJECT ENCODING', 'OBJECT ENCODING of every type', [...Object.values(K), '{t}missing'].map((k) => ['OBJECT', 'ENCODING', k])),
  c('TYPE', 'TYPE of every type', [...Object.values(K), '{t}missing'].map((k) => ['TYPE', k])),
  c('XINFO STREAM', 'XINFO STREAM', [['XINFO', 'STREAM', K.stream], ['XINFO', 'STREAM', K.stream, 'FULL']]),
  c('CLIENT REPLY', 'CLIENT REPLY SKIP', [['CLIENT', 'REPLY', 'SKIP'], ['GET', K.string], ['GET', K.string]]),
  c('CLIENT REPLY', 'CLIENT REPLY OFF then ON', [['CLIENT', 'REPLY', 'OFF'], ['INCR', K.string], ['NOPE'], ['CLIENT', 'REPLY', 'ON'], ['GET', K.string]]),
  c('MGET', 'keys in two slots', [['MGET', K.string, '{u}x'], ['MSET', '{t}a', '1', '{u}b', '2']]),
  c('BLPOP', 'BLPOP timing out, bad timeouts', [['BLPOP', '{t}empty', '0.01'], ['BLPOP', '{t}empty', '-1'], ['BLPOP', K.list, K.string, '0.01']]),
  c('BLPOP', 'BLPOP inside MULTI', [['MULTI'], ['BLPOP', '{t}empty', '0'], ['LPUSH', '{t}empty', 'x'], ['BLPOP', '{t}empty', '0'], ['EXEC']]),
  c('XREAD', 'XREAD BLOCK timing out', [['XREAD', 'BLOCK', '10', 'STREAMS', K.stream, '$'], ['XREAD', 'COUNT', '1', 'STREAMS', K.stream, '0']]),
  c('KEYS', 'KEYS with one match', [['KEYS', '{t}l*'], ['KEYS', '{nomatch}*']]),
  c('SCAN', 'SCAN to the end', [['SCAN', '0', 'MATCH', '{t}l*', 'COUNT', '1000']]),
  c('SORT', 'SORT BY and GET patterns', [
    ['RPUSH', '{t}n', '3', '1', '2'], ['MSET', '{t}w_1', '3', '{t}w_2', '2', '{t}w_3', '1'], ['SORT', '{t}n'], ['SORT', '{t}n', 'BY', '{t}w_*'],
    ['SORT', '{t}n', 'BY', 'nosort', 'GET', '#', 'GET', '{t}w_*'], ['SORT', '{t}n', 'BY', '{t}w_*', 'STORE', '{t}sorted'],
  ]),
  c('INFO', 'INFO keyspace', [['INFO', 'keyspace']]),
  // Inside MULTI: commands that reach every master, keys only the node finds, Redis's own refusals.
  c('DBSIZE', 'DBSIZE, KEYS and FLUSHDB inside MULTI', [['MULTI'], ['DBSIZE'], ['SET', '{t}fx', '1'], ['KEYS', '{t}f*'], ['DBSIZE'], ['EXEC'], ['MULTI'], ['FLUSHDB'], ['DBSIZE'], ['EXEC']]),
  c('DBSIZE', 'DBSIZE and SORT inside MULTI, RESP3', [
    ['CLIENT', 'REPLY', 'SKIP'], ['HELLO', '3'], ['RPUSH', '{t}n', '3', '1', '2'], ['MULTI'], ['DBSIZE'], ['SORT', '{t}n', 'BY', 'nosort'], ['SORT', '{t}n', 'STORE', '{t}sorted'], ['EXEC'],
  ]),
  c('SORT', 'SORT BY and STORE inside MULTI', [['RPUSH', '{t}n', '3', '1', '2'], ['MULTI'], ['SORT', '{t}n', 'BY', 'nosort'], ['SORT', '{t}n', 'BY', 'nosort', 'STORE', '{t}sorted'], ['EXEC'], ['LRANGE', '{t}sorted', '0', '-1']]),
  c('SAVE', 'SAVE and SHUTDOWN inside MULTI', [['MULTI'], ['SAVE'], ['SHUTDOWN', 'NOSAVE'], ['GET', K.string], ['EXEC']]),
  c('SUBSCRIBE', 'CLIENT REPLY OFF then SUBSCRIBE, RESP3', [['CLIENT', 'REPLY', 'OFF'], ['HELLO', '3'], ['SUBSCRIBE', 'a', 'b'], ['PING'], ['UNSUBSCRIBE', 'b', 'a'], ['CLIENT', 'REPLY', 'ON']]),
  c('SET', 'SET with GET and options', [['SET', K.string, 'x', 'GET', 'EX', '100'], ['TTL', K.string], ['SET', K.string, 'y', 'NX', 'XX'], ['SET', K.list, 'x', 'GET']]),
  c('QUIT', 'QUIT then more', [['QUIT'], ['PING']]),
  c('INCR', 'a pipeline of 200', Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? ['INCR', '{t}c'] : ['GET', K.string]))),
  c('SET', 'a 100 kB value', [['SET', '{t}big', 'x'.repeat(100_000)], ['STRLEN', '{t}big'], ['GETRANGE', '{t}big', '-3', '-1']]),
  c('COMMAND GETKEYS', 'COMMAND GETKEYS', [['COMMAND', 'GETKEYS', 'MSET', 'a', '1', 'b', '2'], ['COMMAND', 'GETKEYS', 'GET'], ['COMMAND', 'GETKEYS', 'NOPE', 'a']]),
  c('COMMAND INFO', 'COMMAND INFO of some', [['COMMAND', 'INFO', 'get', 'nope', 'config|get'], ['COMMAND', 'COUNT']]),
  c('DUMP', 'DUMP then RESTORE', [['DUMP', K.zset], ['DEL', '{t}copy'], ['OBJECT', 'ENCODING', K.zset]]),
  c('EXPIRE', 'EXPIRE options and TTLs', [['EXPIRE', K.string, '100', 'NX'], ['EXPIRE', K.string, '50', 'GT'], ['TTL', K.string], ['PERSIST', K.string], ['TTL', K.string], ['PTTL', '{t}missing']]),
];

/** The one table of docs/compatibility.md's "## Commands that answer differently": every (command, case) it lists. */
interface Row {
  line: number;
  commands: string[];
  /** Case names; `*` is every case of the command. */
  cases: string[];
  /** The row holds on the back end under test (its "Back ends" cell). */
  applies: boolean;
}

/**
 * A "Back ends" cell: `every`, or a list of `Redis 7.2+` (that version and later) and `Valkey 8`
 * (that major version and later). Commands a back end does not have are not compared on it.
 */
function appliesHere(cell: string): boolean {
  if (cell === 'every') return true;
  return cell.split(',').map((p) => p.trim()).some((part) => {
    const redis = /^Redis (\d+)\.(\d+)\+$/.exec(part);
    if (redis !== null) return SERVER.flavor === 'redis' && redisAtLeast(Number(redis[1]), Number(redis[2]));
    const valkey = /^Valkey (\d+)$/.exec(part);
    if (valkey !== null) return SERVER.flavor === 'valkey' && SERVER.major >= Number(valkey[1]);
    throw new Error(`${COMPATIBILITY_PAGE}: cannot read the back ends "${cell}"`);
  });
}

const COMPATIBILITY_PAGE = 'docs/compatibility.md';
const COMPATIBILITY_SECTION = '## Commands that answer differently';

function readCompatibilityTable(): Row[] {
  const lines = fs.readFileSync(path.join(__dirname, '../..', COMPATIBILITY_PAGE), 'utf8').split('\n');
  const start = lines.findIndex((l) => l.trim() === COMPATIBILITY_SECTION);
  if (start < 0) throw new Error(`${COMPATIBILITY_PAGE} has no "${COMPATIBILITY_SECTION}" section`);
  const rows: Row[] = [];
  let headerSeen = false;
  for (let i = start + 1; i < lines.length && !lines[i].startsWith('## '); i++) {
    const line = lines[i].trim();
    if (!line.startsWith('|')) {
      if (headerSeen && rows.length > 0) break; // the table ended
      continue;
    }
    const cells = line.slice(1, -1).split(/(?<!\\)\|/).map((s) => s.trim()); // `\|` is a | inside a cell
    if (!headerSeen) {
      if (cells[0] !== 'Command' || cells[1] !== 'Case' || cells[2] !== 'Back ends') {
        throw new Error(`${COMPATIBILITY_PAGE}:${i + 1}: the table must start with | Command | Case | Back ends |`);
      }
      headerSeen = true;
      continue;
    }
    if (/^-+$/.test(cells[0])) continue;
    const ticked = (cell: string): string[] => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
    rows.push({ line: i + 1, commands: ticked(cells[0]), cases: ticked(cells[1]), applies: appliesHere(cells[2]) });
  }
  return rows;
}

/** Each reply's shape: its type, an array's length, the full text of an error or simple string. */
function shape(frames: string[]): string[] {
  return frames.map((f) => {
    const type = f[0];
    if (type === '-' || type === '+') return f;
    if (f.startsWith('$-1') || f.startsWith('*-1') || type === '_') return 'nil';
    if (type === '*' || type === '%' || type === '~') return f.slice(0, f.indexOf('\r\n'));
    return type;
  });
}

const SETUP: string[][] = [['FLUSHALL'], ['SCRIPT', 'FLUSH'], ['FUNCTION', 'FLUSH'], ...FIXTURES];
const SETUP_REPLIES = '+OK\r\n'.repeat(4) + ':3\r\n:2\r\n:3\r\n:3\r\n$3\r\n1-1\r\n+OK\r\n:1\r\n';

interface Outcome {
  /** The replies to the case and to the RESET after it, as sent (the fixtures' left out). */
  replies: string[];
  closed: boolean;
}

/** Runs one case on a server: fixtures, the case, RESET (so MULTI, SUBSCRIBE, CLIENT REPLY end). */
async function run(port: number, test: CorpusCase): Promise<Outcome> {
  let subscriber: Redis | undefined;
  try {
    if (test.subscriber !== undefined) {
      subscriber = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      await subscriber.connect();
      await subscriber.subscribe(test.subscriber);
    }
    const result: Exchange = await exchange(port, [...SETUP, ...test.requests, ['RESET']]);
    const frames = splitReplies(result.replies);
    const setup = frames.slice(0, SETUP.length).join('');
    if (setup !== SETUP_REPLIES) throw new Error(`${test.command} | ${test.kind}: the fixtures on port ${port} got ${JSON.stringify(setup)}`);
    return { replies: frames.slice(SETUP.length), closed: result.closed };
  } finally {
    subscriber?.disconnect();
  }
}

interface Difference {
  test: CorpusCase;
  want: Outcome;
  got: Outcome;
}

function show(d: Difference): string {
  const cut = (s: string): string => (s.length > 400 ? `${s.slice(0, 400)}...` : s);
  const request = cut(JSON.stringify(d.test.requests));
  const side = (o: Outcome): string => cut(JSON.stringify(o.replies.join(''))) + (o.closed ? ' (closed)' : '');
  return `${d.test.command} | ${d.test.kind}\n  sent:      ${request}\n  redis:     ${side(d.want)}\n  slotproxy: ${side(d.got)}`;
}

test('every documented command and the corpus: through slotproxy as on one Redis, or listed in docs/compatibility.md', async () => {
  const [docs, info] = await Promise.all([sendCommand(referencePort(), ['COMMAND', 'DOCS']), sendCommand(referencePort(), ['COMMAND', 'INFO'])]);
  const specs = commandSpecs(docs, info);
  const generated: CorpusCase[] = specs.flatMap(casesFor).map((t) => ({ ...t, byShape: !CALIBRATE && COMPARED_BY_SHAPE.has(t.command) }));
  const cases = [...generated, ...CORPUS];
  const proxyPort = reference2 !== undefined ? reference2.masters[0].port : proxy().address.port;
  const differences: Difference[] = [];
  for (const t of cases) {
    const [want, got] = await Promise.all([run(referencePort(), t), run(proxyPort, t)]);
    const view = (o: Outcome): string[] =>
      t.byShape !== true ? o.replies : COMPARED_BY_TYPE.has(t.command) ? shape(o.replies).map((f) => f[0]) : shape(o.replies);
    if (JSON.stringify([view(want), want.closed]) !== JSON.stringify([view(got), got.closed])) differences.push({ test: t, want, got });
  }

  const rows = readCompatibilityTable().filter((r) => r.applies);
  const hasCommand = new Set(cases.map((t) => t.command));
  const covers = (r: Row, d: Difference): boolean =>
    r.commands.includes(d.test.command) && (r.cases.includes('*') || r.cases.includes(d.test.kind));
  const unlisted = differences.filter((d) => !rows.some((r) => covers(r, d)));
  // A row stays true: each of its commands, and each case it names, still has a difference it covers.
  const stale: string[] = [];
  for (const r of rows) {
    if (!r.commands.some((command) => hasCommand.has(command))) continue;
    const covered = differences.filter((d) => covers(r, d));
    for (const command of r.commands) {
      // A command this back end has not (CLUSTER MYSHARDID before 7.2) cannot differ on it.
      if (!hasCommand.has(command)) continue;
      if (!covered.some((d) => d.test.command === command)) stale.push(`${COMPATIBILITY_PAGE}:${r.line}: ${command} answers as one Redis does`);
    }
    for (const kind of r.cases.filter((k) => k !== '*')) {
      if (!covered.some((d) => d.test.kind === kind)) stale.push(`${COMPATIBILITY_PAGE}:${r.line}: case ${kind} answers as one Redis does`);
    }
  }
  const commands = specs.filter((s) => s.words.length === 1).length;
  process.stdout.write(
    `differential: ${commands} commands (${specs.length} with subcommands), ${cases.length} cases compared, ` +
      `${differences.length} differences (${unlisted.length === 0 ? 'all listed' : `${unlisted.length} not listed`})` +
      `${stale.length > 0 ? `, ${stale.length} listed but no longer different` : ''}\n`,
  );
  expect({ unlisted: unlisted.map(show), stale }).toEqual({ unlisted: [], stale: [] });
  // About 1,400 cases, one after the other: 12 s on 7.0.15, 30-40 s on 7.4.1 and Valkey 8.0.1, 100 s on a loaded 2-core machine.
}, 300_000);
