// Commands slotproxy answers itself (PING, HELLO, SELECT, AUTH, RESET, EXEC's arity, CLUSTER KEYSLOT,
// CLIENT ...) checked against one Redis: a single-node Redis Cluster owning every slot, the
// reference for what a client of one server sees. Replies are compared byte for byte. CLIENT
// LIST/INFO/KILL/REPLY/PAUSE/UNBLOCK are then exercised on the proxy's own clients.

import net from 'node:net';
import Redis from 'ioredis';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { useProxy } from '../helpers/proxy';
import { exchange } from '../helpers/raw-exchange';
import { errorOf } from '../helpers/reply-error';
import { keyPerMaster } from '../helpers/master-keys';
import { redisAtLeast } from '../helpers/server-version';

const { proxy, connect, cluster } = useProxy();
let reference: RedisCluster | undefined;

beforeAll(async () => {
  reference = await RedisCluster.start({ masters: 1, replicasPerMaster: 0 });
}, 60_000);
afterAll(async () => {
  await reference?.stop();
}, 30_000);

const referencePort = (): number => {
  if (reference === undefined) throw new Error('the reference node did not start');
  return reference.masters[0].port;
};

/**
 * A failed AUTH pipelined behind replies not yet written: Redis 7.0 answers WRONGPASS; from 7.2 on
 * (Valkey 8 too) it answers nothing at all, and the proxy still answers WRONGPASS (a deliberate
 * difference, docs/compatibility.md): the same as one Redis on 7.0 only.
 */
const WRONGPASS = '-WRONGPASS invalid username-password pair or user is disabled.\r\n';
const FAILED_AUTH_PIPELINED: [string, string[][]][] = [
  ['AUTH without a password configured', [['AUTH', 'a', 'b', 'c'], ['AUTH', 'x'], ['AUTH', 'u', 'p'], ['AUTH', 'default', 'x']]],
  ['a failed AUTH with no reply owed before it is answered', [['AUTH', 'u', 'p'], ['HELLO', '2', 'AUTH', 'u', 'p']]],
];
/** The proxy's answers to FAILED_AUTH_PIPELINED (7.0's), by case; the unanswered one is the last WRONGPASS. */
const ANSWERED_AUTH: Record<string, string> = {
  'AUTH without a password configured':
    '-ERR syntax error\r\n-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n' + WRONGPASS + '+OK\r\n',
  'a failed AUTH with no reply owed before it is answered': WRONGPASS + WRONGPASS,
};

/** Each case is one connection's requests; their replies must match the reference's byte for byte. */
const SAME_AS_REDIS: [string, string[][]][] = [
  ['PING with too many arguments', [['PING', 'x', 'y', 'z'], ['PING', 'x'], ['PING']]],
  ['ECHO arity', [['ECHO'], ['ECHO', 'a', 'b'], ['ECHO', 'a']]],
  ['QUIT with arguments answers OK and closes', [['QUIT', 'x', 'y']]],
  ['SELECT', [['SELECT', 'abc'], ['SELECT', '1'], ['SELECT', '0'], ['SELECT', '0', '1'], ['SELECT', '99999999999']]],
  ['HELLO errors', [['HELLO', '4'], ['HELLO', 'abc'], ['HELLO', '2', 'FOO'], ['HELLO', '2', 'SETNAME'], ['HELLO', '2', 'AUTH', 'a'], ['HELLO', '2', 'SETNAME', 'a', 'b']]],
  ...(redisAtLeast(7, 2) ? [] : FAILED_AUTH_PIPELINED),
  ['READONLY, READWRITE, ASKING, RESET arity', [['READONLY', 'x'], ['READWRITE', 'x'], ['ASKING'], ['RESET', 'x']]],
  ['EXEC with arguments aborts, in and out of MULTI', [['EXEC', 'x'], ['MULTI'], ['SET', 'k', 'v'], ['EXEC', 'x'], ['EXEC']]],
  // Redis's own refusals inside MULTI come first, in its order: arity, then `no_multi`, then MULTI/WATCH's own.
  ['SORT ... BY and STORE inside MULTI: keys found by the node, then queued', [
    ['RPUSH', '{srt}l', '3', '1', '2'], ['MULTI'], ['SORT', '{srt}l', 'BY', 'nosort'], ['SORT', '{srt}l', 'STORE', '{srt}d'], ['SORT', '{srt}l', 'BY', 'w_*', 'STORE', 'elsewhere'],
    ['EXEC'], ['MULTI'], ['SORT', '{srt}l', 'BY', 'nosort', 'STORE', '{srt}d'], ['EXEC'], ['LRANGE', '{srt}d', '0', '-1'], ['DEL', '{srt}l', '{srt}d'],
  ]],
  ['commands Redis forbids inside MULTI', [['MULTI'], ['SAVE'], ['SHUTDOWN'], ['SAVE', 'x'], ['WATCH', 'k'], ['MULTI'], ['SET', 'k', 'v'], ['EXEC']]],
  ['CLUSTER KEYSLOT', [['CLUSTER', 'KEYSLOT'], ['CLUSTER', 'KEYSLOT', 'a', 'b'], ['CLUSTER', 'KEYSLOT', 'foo{bar}']]],
  ['CLIENT names', [['CLIENT', 'SETNAME', 'a b'], ['CLIENT', 'SETNAME'], ['CLIENT', 'GETNAME', 'x'], ['CLIENT', 'SETNAME', 'me'], ['CLIENT', 'GETNAME'], ['CLIENT', 'SETNAME', ''], ['CLIENT', 'GETNAME']]],
  ['CLIENT arity and unknown subcommands', [['CLIENT'], ['CLIENT', 'NOPE'], ['CLIENT', 'ID', 'x'], ['CLIENT', 'INFO', 'x'], ['CLIENT', 'REPLY'], ['CLIENT', 'HELP']]],
  ['CLIENT LIST errors', [['CLIENT', 'LIST', 'foo'], ['CLIENT', 'LIST', 'TYPE', 'foo'], ['CLIENT', 'LIST', 'ID', '1', 'x'], ['CLIENT', 'LIST', 'ID'], ['CLIENT', 'LIST', 'TYPE', 'normal', 'ID', '1'], ['CLIENT', 'LIST', 'ID', '0'], ['CLIENT', 'LIST', 'TYPE', 'pubsub']]],
  ['CLIENT KILL errors and misses', [
    ['CLIENT', 'KILL', '1.2.3.4:5'], ['CLIENT', 'KILL', 'ID', '0'], ['CLIENT', 'KILL', 'ID', 'x'], ['CLIENT', 'KILL', 'ID', '999999'],
    ['CLIENT', 'KILL', 'foo', 'bar'], ['CLIENT', 'KILL', 'ID', '1', 'ID'], ['CLIENT', 'KILL', 'TYPE', 'foo'], ['CLIENT', 'KILL', 'TYPE', 'master'],
    ['CLIENT', 'KILL', 'USER', 'nobody'], ['CLIENT', 'KILL', 'ADDR', '1.2.3.4:5', 'SKIPME', 'no'], ['CLIENT', 'KILL', 'SKIPME', 'maybe'],
    ['CLIENT', 'KILL', 'LADDR', '1.2.3.4:5'], ['CLIENT', 'KILL', 'MAXAGE', '10'],
    // MAXAGE came with Redis 7.4 and Valkey 8 (a syntax error before).
    ['CLIENT', 'KILL', 'MAXAGE', 'x'], ['CLIENT', 'KILL', 'MAXAGE', '0'], ['CLIENT', 'KILL', 'MAXAGE', '-1'], ['CLIENT', 'KILL', 'ID', '1', 'MAXAGE', '99999999999999999999'],
    ['CLIENT', 'KILL', 'MAXAGE', '100000', 'SKIPME', 'no'],
  ]],
  ['CLIENT REPLY, NO-EVICT', [['CLIENT', 'REPLY', 'foo'], ['CLIENT', 'NO-EVICT'], ['CLIENT', 'NO-EVICT', 'maybe'], ['CLIENT', 'NO-EVICT', 'on'], ['CLIENT', 'NO-EVICT', 'OFF']]],
  // Redis sends Pub/Sub confirmations (pushes in RESP3) whatever CLIENT REPLY says; a subscribed PING's reply it drops.
  ['CLIENT REPLY OFF does not silence (un)subscribe confirmations, RESP2', [
    ['CLIENT', 'REPLY', 'OFF'], ['SUBSCRIBE', 'rch1', 'rch2'], ['PSUBSCRIBE', 'rch*'], ['PING'], ['UNSUBSCRIBE', 'rch2', 'rch1'], ['PUNSUBSCRIBE'], ['CLIENT', 'REPLY', 'ON'],
  ]],
  ['CLIENT REPLY OFF and SKIP do not silence push frames, RESP3', [
    ['CLIENT', 'REPLY', 'OFF'], ['HELLO', '3'], ['SUBSCRIBE', 'r3'], ['PING'], ['CLIENT', 'REPLY', 'SKIP'], ['SSUBSCRIBE', 'r3s'], ['GET', 'nokey'],
    ['CLIENT', 'REPLY', 'ON'], ['UNSUBSCRIBE', 'r3'], ['SUNSUBSCRIBE'],
  ]],
  ['CLIENT REPLY OFF, SKIP and ON', [['CLIENT', 'REPLY', 'SKIP'], ['ECHO', 'skipped'], ['ECHO', 'a'], ['CLIENT', 'REPLY', 'OFF'], ['ECHO', 'b'], ['CLIENT', 'REPLY', 'SKIP'], ['ECHO', 'c'], ['CLIENT', 'REPLY', 'ON'], ['ECHO', 'd']]],
  ['CLIENT TRACKING option errors, OFF, and the tracking queries', [
    ['CLIENT', 'TRACKING'], ['CLIENT', 'TRACKING', 'foo'], ['CLIENT', 'TRACKING', 'on', 'REDIRECT', '999999'], ['CLIENT', 'TRACKING', 'on', 'PREFIX', 'a'],
    ['CLIENT', 'TRACKING', 'on', 'BCAST', 'OPTIN'], ['CLIENT', 'TRACKING', 'on', 'OPTIN', 'OPTOUT'], ['CLIENT', 'TRACKING', 'on', 'nope'], ['CLIENT', 'TRACKING', 'off'],
    ['CLIENT', 'CACHING'], ['CLIENT', 'CACHING', 'yes'], ['CLIENT', 'GETREDIR'], ['CLIENT', 'GETREDIR', 'x'], ['CLIENT', 'TRACKINGINFO'],
    ['CLIENT', 'TRACKING', 'on', 'REDIRECT', 'x'], ['CLIENT', 'TRACKING', 'on', 'REDIRECT', '999999', 'REDIRECT', '2'], ['CLIENT', 'TRACKING', 'on', 'PREFIX'], ['CLIENT', 'TRACKING', 'on', 'REDIRECT'],
    ['CLIENT', 'TRACKING', 'on', 'BCAST', 'OPTOUT'], ['CLIENT', 'TRACKING', 'maybe', 'BCAST'], ['CLIENT', 'TRACKINGINFO', 'x'], ['CLIENT', 'CACHING', 'yes', 'no'],
  ]],
  ['CLIENT TRACKING state: modes cannot be switched while on, prefixes must not overlap, CACHING per mode', [
    ['CLIENT', 'TRACKING', 'on'], ['CLIENT', 'TRACKINGINFO'], ['CLIENT', 'GETREDIR'], ['CLIENT', 'CACHING', 'yes'], ['CLIENT', 'CACHING', 'no'], ['CLIENT', 'CACHING', 'maybe'],
    ['CLIENT', 'TRACKING', 'on', 'BCAST'], ['CLIENT', 'TRACKING', 'on', 'OPTIN'], ['CLIENT', 'TRACKING', 'on', 'OPTOUT'], ['CLIENT', 'CACHING', 'no'], ['CLIENT', 'CACHING', 'yes'],
    ['CLIENT', 'TRACKING', 'on', 'NOLOOP', 'OPTOUT'], ['CLIENT', 'TRACKINGINFO'], ['CLIENT', 'TRACKING', 'off'], ['CLIENT', 'TRACKING', 'off'], ['CLIENT', 'CACHING', 'no'],
    ['CLIENT', 'TRACKING', 'on', 'BCAST', 'PREFIX', 'ab', 'PREFIX', 'a'], ['CLIENT', 'TRACKING', 'on', 'BCAST', 'PREFIX', 'b', 'PREFIX', 'a'], ['CLIENT', 'TRACKING', 'on', 'BCAST', 'PREFIX', 'abc'],
    ['CLIENT', 'TRACKING', 'on', 'BCAST', 'PREFIX', 'a'], ['CLIENT', 'TRACKING', 'on', 'BCAST', 'PREFIX', 'c', 'NOLOOP'], ['CLIENT', 'TRACKING', 'on'], ['CLIENT', 'TRACKINGINFO'],
    ['CLIENT', 'CACHING', 'yes'], ['RESET'], ['CLIENT', 'TRACKINGINFO'],
  ]],
  ['CLIENT TRACKINGINFO in RESP3: a map, its flags a set', [
    ['CLIENT', 'REPLY', 'OFF'], ['HELLO', '3'], ['CLIENT', 'REPLY', 'ON'], ['CLIENT', 'TRACKINGINFO'], ['CLIENT', 'TRACKING', 'on', 'OPTIN', 'NOLOOP'], ['CLIENT', 'CACHING', 'yes'], ['CLIENT', 'TRACKINGINFO'], ['CLIENT', 'TRACKINGINFO'],
    ['CLIENT', 'TRACKING', 'off'], ['CLIENT', 'TRACKING', 'on', 'BCAST', 'PREFIX', 'x', 'PREFIX', 'a'], ['CLIENT', 'TRACKINGINFO'],
  ]],
  ['CLIENT UNBLOCK of a client that is not blocked', [['CLIENT', 'UNBLOCK'], ['CLIENT', 'UNBLOCK', 'x'], ['CLIENT', 'UNBLOCK', '999999'], ['CLIENT', 'UNBLOCK', '999999', 'foo'], ['CLIENT', 'UNBLOCK', '999999', 'timeout', 'x']]],
  ['CLIENT PAUSE errors, and UNPAUSE', [['CLIENT', 'PAUSE'], ['CLIENT', 'PAUSE', 'x'], ['CLIENT', 'PAUSE', '-1'], ['CLIENT', 'PAUSE', '10', 'foo'], ['CLIENT', 'UNPAUSE', 'x'], ['CLIENT', 'UNPAUSE']]],
];

// Redis 7.2+ leaves a pipelined failed AUTH unanswered (its client would wait forever); the proxy answers it.
if (redisAtLeast(7, 2)) {
  test.each(FAILED_AUTH_PIPELINED)('a failed AUTH pipelined behind other replies is answered WRONGPASS, where Redis 7.2+ answers nothing: %s', async (what, requests) => {
    const [want, got] = await Promise.all([exchange(referencePort(), requests), exchange(proxy().address.port, requests)]);
    const answered = ANSWERED_AUTH[what];
    expect(got).toEqual({ closed: false, replies: answered });
    const at = answered.lastIndexOf(WRONGPASS);
    expect(want).toEqual({ closed: false, replies: answered.slice(0, at) + answered.slice(at + WRONGPASS.length) });
  });
}

describe('answered as one Redis answers, byte for byte', () => {
  test.each(SAME_AS_REDIS)('%s', async (_what, requests) => {
    const [want, got] = await Promise.all([exchange(referencePort(), requests), exchange(proxy().address.port, requests)]);
    expect(got).toEqual(want);
  });

  // The fields are the back end's version's (7.2 added watch, lib-name, lib-ver; Valkey 8 the tot-* counters).
  test("CLIENT INFO has the fields of the back end's version, in its order, and its values where they do not depend on the server", async () => {
    const requests = [['CLIENT', 'SETNAME', 'me'], ['CLIENT', 'SETINFO', 'LIB-NAME', 'mylib'], ['WATCH', '{w}a', '{w}b', '{w}a'], ['CLIENT', 'INFO']];
    const [want, got] = await Promise.all([exchange(referencePort(), requests), exchange(proxy().address.port, requests)]);
    const fields = (r: string): [string, string][] => [...r.matchAll(/ ?([a-z-]+)=(\S*)/g)].map((m) => [m[1], m[2]]);
    expect(fields(got.replies).map(([f]) => f)).toEqual(fields(want.replies).map(([f]) => f));
    // The values a client's own requests decide (not ids, addresses, times, buffer sizes).
    const same = ['name', 'flags', 'db', 'sub', 'psub', 'ssub', 'multi', 'watch', 'cmd', 'user', 'redir', 'resp', 'lib-name', 'lib-ver', 'tot-net-in', 'tot-net-out', 'tot-cmds'];
    const values = (r: string): [string, string][] => fields(r).filter(([f]) => same.includes(f));
    expect(values(got.replies)).toEqual(values(want.replies));
    expect(got.replies).toMatch(/ name=me age=\d+ idle=\d+ flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 /);
  });
});

/** Redis 7.2 shows CLIENT SETINFO's values (ioredis sets them on connect). */
const LIB_FIELDS = redisAtLeast(7, 2) ? ' lib-name=ioredis lib-ver=[0-9.]+' : '';

describe("the proxy's own clients", () => {
  const idOf = async (c: Redis): Promise<number> => Number(await c.client('ID'));

  test('CLIENT LIST shows every proxy client with its name, type, MULTI state and last command', async () => {
    const a = connect();
    const sub = connect();
    const txn = connect();
    const [aId, subId, txnId] = await Promise.all([idOf(a), idOf(sub), idOf(txn)]);
    await a.client('SETNAME', 'alpha');
    await sub.subscribe('news');
    await txn.multi({ pipeline: false });
    await txn.set('k', 'v');
    const list = async (...args: string[]): Promise<string> => String(await a.call('CLIENT', 'LIST', ...args));
    const all = await list();
    const port = proxy().address.port;
    expect(all).toMatch(new RegExp(`id=${aId} addr=127\\.0\\.0\\.1:\\d+ laddr=127\\.0\\.0\\.1:${port} fd=\\d+ name=alpha .* flags=N db=0 .* cmd=client\\|list user=default redir=-1 resp=2${LIB_FIELDS}[ \n]`));
    expect(all).toMatch(new RegExp(`id=${subId} .* flags=P db=0 sub=1 psub=0 ssub=0 multi=-1 .* cmd=subscribe `));
    expect(all).toMatch(new RegExp(`id=${txnId} .* flags=x db=0 sub=0 psub=0 ssub=0 multi=1 .* cmd=set `));
    expect((await list('TYPE', 'pubsub')).trim().split('\n').map((l) => l.split(' ')[0])).toEqual([`id=${subId}`]);
    expect((await list('ID', String(aId), '999999', String(aId))).trim().split('\n').map((l) => l.split(' ')[0])).toEqual([`id=${aId}`, `id=${aId}`]);
    await txn.discard();
  });

  test('CLIENT KILL closes the matching proxy clients and counts them; SKIPME spares the caller', async () => {
    const killer = connect();
    const victim = connect({ retryStrategy: () => null });
    const victimId = await idOf(victim);
    const closed = new Promise<void>((resolve) => victim.once('end', () => resolve()));
    expect(await killer.client('KILL', 'ID', String(victimId))).toBe(1);
    await closed;
    expect(await killer.client('KILL', 'ID', String(victimId))).toBe(0);
    // The caller matches ADDR but SKIPME yes (the default) spares it; the old form may kill itself.
    const addr = String(await killer.client('INFO')).match(/ addr=(\S+)/)?.[1] ?? '';
    expect(await killer.client('KILL', 'ADDR', addr)).toBe(0);
    expect(await killer.ping()).toBe('PONG');
    const byUser = connect({ retryStrategy: () => null });
    await byUser.ping();
    const others = String(await killer.client('LIST')).trim().split('\n').length - 1;
    expect(await killer.client('KILL', 'USER', 'default', 'SKIPME', 'yes')).toBe(others);
    expect(await killer.call('CLIENT', 'KILL', addr)).toBe('OK');
  });

  test('CLIENT REPLY OFF through ioredis-free raw requests keeps replies in order for later commands', async () => {
    const requests = [['SET', 'reply-mode', '1'], ['CLIENT', 'REPLY', 'OFF'], ['INCR', 'reply-mode'], ['CLIENT', 'REPLY', 'ON'], ['GET', 'reply-mode']];
    expect((await exchange(proxy().address.port, requests)).replies).toBe('+OK\r\n+OK\r\n$1\r\n2\r\n');
  });

  test('with CLIENT REPLY OFF a RESP3 subscriber still gets its messages, as push frames', async () => {
    const socket = net.connect(proxy().address.port, '127.0.0.1');
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    const until = async (what: string): Promise<void> => {
      for (let i = 0; i < 200 && !got.includes(what); i++) await new Promise((r) => setTimeout(r, 10));
      expect(got).toContain(what);
    };
    try {
      socket.write('CLIENT REPLY OFF\r\nHELLO 3\r\nSUBSCRIBE quiet\r\n');
      await until('>3\r\n$9\r\nsubscribe\r\n$5\r\nquiet\r\n:1\r\n');
      expect(await connect().publish('quiet', 'hi')).toBe(1);
      await until('>3\r\n$7\r\nmessage\r\n$5\r\nquiet\r\n$2\r\nhi\r\n');
      // Nothing but the pushes: HELLO's reply was dropped.
      expect(got).toBe('>3\r\n$9\r\nsubscribe\r\n$5\r\nquiet\r\n:1\r\n>3\r\n$7\r\nmessage\r\n$5\r\nquiet\r\n$2\r\nhi\r\n');
    } finally {
      socket.destroy();
    }
  });

  test('CLIENT PAUSE WRITE reaches every master: a write to any of them waits out the pause', async () => {
    const admin = connect();
    const writer = connect();
    const keys = await keyPerMaster(cluster(), 'paused');
    const pauseMs = 600;
    expect(await admin.client('PAUSE', String(pauseMs), 'WRITE')).toBe('OK');
    const started = performance.now();
    const took = await Promise.all(keys.map(async ({ key }) => (await writer.set(key, 'v'), performance.now() - started)));
    // Each master paused its write: none came back before the pause (less the time to send it) was over.
    for (const ms of took) expect(ms).toBeGreaterThan(pauseMs - 100);
  });

  test('CLIENT UNPAUSE gets through although a paused write holds its shared back-end connection', async () => {
    const writer = connect();
    // One shared connection per node (backend.connectionsPerNode's default): the admin's lane is the writer's.
    const admin = connect();
    const [{ key }] = await keyPerMaster(cluster(), 'unpause');
    expect(await connect().client('PAUSE', '30000', 'WRITE')).toBe('OK');
    const write = writer.set(key, 'v');
    expect(await admin.client('UNPAUSE')).toBe('OK');
    expect(await write).toBe('OK');
  });

  test('CLIENT UNBLOCK ends a blocked proxy client as a timeout, or with the UNBLOCKED error', async () => {
    const blocked = connect();
    const admin = connect();
    const id = await idOf(blocked);
    const popped = blocked.blpop('unblock-me', 0);
    const waitBlocked = async (): Promise<void> => {
      for (;;) {
        if (/ flags=b /.test(String(await admin.client('LIST', 'ID', String(id))))) return;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };
    await waitBlocked();
    expect(await admin.client('UNBLOCK', String(id))).toBe(1);
    expect(await popped).toBeNull();
    const again = blocked.blpop('unblock-me', 0);
    await waitBlocked();
    expect(await admin.client('UNBLOCK', String(id), 'ERROR')).toBe(1);
    expect(await errorOf(again)).toBe('UNBLOCKED client unblocked via CLIENT UNBLOCK');
    expect(await admin.client('UNBLOCK', String(id))).toBe(0);
  });
});
