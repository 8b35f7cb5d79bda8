// Client-side caching through slotproxy (CLIENT TRACKING), compared with one Redis byte for byte:
// the same scripted conversation, over several connections, runs on a single-node cluster owning
// every slot and on the proxy in front of 3 masters; every connection must receive exactly the same
// bytes, invalidations included, in the same place relative to its own replies (the harness's sync
// replies left out: an invalidation of another client's write may fall on either side of one).

import { useProxy } from '../helpers/proxy';
import { useCluster } from '../helpers/cluster';
import { ScriptStep, runScript, withoutSyncs } from '../helpers/tracking-script';
import { encodeRequest, exchange } from '../helpers/raw-exchange';
import net from 'node:net';
import { createHash } from 'node:crypto';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { SERVER, redisAtLeast } from '../helpers/server-version';

const { proxy, cluster } = useProxy();
/** One Redis: a single-node cluster owning every slot. */
const reference = useCluster({ masters: 1, replicasPerMaster: 0 });
const referencePort = (): number => reference().masters[0].port;

const a = (...args: string[]): ScriptStep => ({ on: 'a', args });
const b = (...args: string[]): ScriptStep => ({ on: 'b', args });
/** Requests sent together on `a` (CLIENT CACHING applies to the very next command). */
const together = (...requests: string[][]): ScriptStep => ({ on: 'a', args: requests });

interface Case {
  setup: Record<string, string[][]>;
  steps: ScriptStep[];
  /** Applied to both streams before they are compared (same length: the runs are synced by length). */
  mask?: (stream: string) => string;
}

const HELLO3 = { a: [['HELLO', '3']] };

const CASES: [string, Case][] = [
  ['RESP3 default mode: what was read is invalidated once, whoever writes it; own writes after the reply', {
    setup: HELLO3,
    steps: [
      a('CLIENT', 'TRACKING', 'ON'), a('GET', '{t}k1'), b('SET', '{t}k1', 'v1'), b('SET', '{t}k1', 'v2'), a('GET', '{t}k1'),
      a('MGET', '{t}k1', '{t}k2'), b('MSET', '{t}k1', 'x', '{t}k2', 'y'), a('SET', '{t}k1', 'own'), a('GET', '{t}k1'), a('SET', '{t}k1', 'own2'),
      a('HGETALL', '{t}h'), b('HSET', '{t}h', 'f', 'v'), a('GET', 'elsewhere'), b('SET', 'elsewhere', '1'), a('STRLEN', '{t}k2'), b('APPEND', '{t}k2', 'z'),
      together(['MULTI'], ['GET', '{t}k4'], ['EXEC']), b('SET', '{t}k4', 'z'), a('EVAL', "return redis.call('GET', KEYS[1])", '1', '{t}k5'), b('DEL', '{t}k5', '{t}k4'),
      b('SET', '{t}k5', 'new'), a('CLIENT', 'TRACKINGINFO'), a('CLIENT', 'GETREDIR'),
      a('GET', '{t}k6'), b('FLUSHALL'), b('SET', '{t}k6', 'after'), a('GET', '{t}k6'), a('FLUSHALL'),
      a('CLIENT', 'TRACKING', 'OFF'), a('GET', '{t}k7'), b('SET', '{t}k7', '1'), a('CLIENT', 'TRACKINGINFO'),
    ],
  }],
  ['RESP2 without REDIRECT: tracking on, nothing sent (RESP2 has no pushes)', {
    setup: {},
    steps: [a('CLIENT', 'TRACKING', 'ON'), a('GET', '{t}r'), b('SET', '{t}r', '1'), b('FLUSHALL'), a('CLIENT', 'TRACKINGINFO'), a('CLIENT', 'GETREDIR')],
  }],
  ['RESP2 REDIRECT to a client subscribed to __redis__:invalidate', {
    setup: { c: [['SUBSCRIBE', '__redis__:invalidate']] },
    steps: [
      a('CLIENT', 'TRACKING', 'ON', 'REDIRECT', '$id:c'), a('GET', '{t}d1'), a('MGET', '{t}d2', '{t}d3'), b('SET', '{t}d1', 'x'), b('DEL', '{t}d2', '{t}d3'),
      a('GET', '{t}d1'), b('FLUSHALL'), a('GET', '{t}d1'), b('SET', '{t}d1', 'y'),
    ],
  }],
  ['RESP3 client redirecting to a RESP3 client', {
    setup: { a: [['HELLO', '3']], c: [['HELLO', '3']] },
    steps: [a('CLIENT', 'TRACKING', 'ON', 'REDIRECT', '$id:c'), a('GET', '{t}e1'), b('SET', '{t}e1', 'x'), a('GET', '{t}e1'), b('FLUSHALL')],
  }],
  ['RESP3 BCAST with prefixes: batches per prefix, own writes included', {
    setup: HELLO3,
    steps: [
      a('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', '{t}user:', 'PREFIX', '{t}cart:'), b('MSET', '{t}user:1', 'a', '{t}cart:1', 'b', '{t}other', 'c'),
      b('SET', '{t}user:2', 'x'), a('DEL', '{t}cart:1'), a('CLIENT', 'TRACKINGINFO'), a('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', '{t}u'),
      a('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', '{t}z:'), b('SET', '{t}z:1', '1'), a('CLIENT', 'TRACKINGINFO'), b('FLUSHALL'),
      a('CLIENT', 'TRACKING', 'OFF'), a('CLIENT', 'TRACKING', 'ON', 'BCAST'), b('SET', 'anything', '1'), a('CLIENT', 'TRACKINGINFO'),
    ],
  }],
  ['RESP2 BCAST through REDIRECT', {
    setup: { c: [['SUBSCRIBE', '__redis__:invalidate']] },
    steps: [a('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', '{t}p', 'REDIRECT', '$id:c'), b('MSET', '{t}p1', '1', '{t}p2', '2', '{t}q', '3'), b('DEL', '{t}p1')],
  }],
  ['OPTIN: only reads after CLIENT CACHING YES; OPTOUT: all but those after CLIENT CACHING NO', {
    setup: HELLO3,
    steps: [
      a('CLIENT', 'TRACKING', 'ON', 'OPTIN'), a('GET', '{t}o1'), b('SET', '{t}o1', '1'), together(['CLIENT', 'CACHING', 'YES'], ['GET', '{t}o1']), b('SET', '{t}o1', '2'),
      together(['CLIENT', 'CACHING', 'YES'], ['CLIENT', 'TRACKINGINFO']), a('GET', '{t}o2'), b('SET', '{t}o2', '1'),
      together(['CLIENT', 'CACHING', 'YES'], ['MULTI'], ['GET', '{t}o3'], ['GET', '{t}o4'], ['EXEC']), b('MSET', '{t}o3', '1', '{t}o4', '1'),
      a('CLIENT', 'CACHING', 'NO'), a('CLIENT', 'TRACKING', 'ON', 'OPTOUT'), a('CLIENT', 'TRACKING', 'OFF'),
      a('CLIENT', 'TRACKING', 'ON', 'OPTOUT'), a('GET', '{t}o5'), together(['CLIENT', 'CACHING', 'NO'], ['GET', '{t}o6']), b('MSET', '{t}o5', '1', '{t}o6', '1'),
      together(['CLIENT', 'CACHING', 'NO'], ['CLIENT', 'TRACKINGINFO']), a('CLIENT', 'CACHING', 'YES'),
    ],
  }],
  ['NOLOOP: the client is not told of its own writes, in default and BCAST mode', {
    setup: HELLO3,
    steps: [
      a('CLIENT', 'TRACKING', 'ON', 'NOLOOP'), a('GET', '{t}n1'), a('SET', '{t}n1', 'mine'), b('SET', '{t}n1', 'theirs'), a('GET', '{t}n1'), b('SET', '{t}n1', 'theirs2'),
      a('CLIENT', 'TRACKINGINFO'), a('CLIENT', 'TRACKING', 'OFF'), a('CLIENT', 'TRACKING', 'ON', 'BCAST', 'NOLOOP', 'PREFIX', '{t}n'),
      a('SET', '{t}n2', 'mine'), b('SET', '{t}n3', 'theirs'), a('INCR', '{t}n4'),
    ],
  }],
];

const v = (n: number): string[] => Array.from({ length: n }, (_, i) => `{t}v${i + 1}`);
const msetAll = (n: number): string[] => ['MSET', ...v(n).flatMap((k) => [k, 'x'])];
const maxKeys = (n: number): string[] => ['CONFIG', 'SET', 'tracking-table-max-keys', String(n)];
/** Redis evicts random keys, the proxy the oldest: which ones is masked, how many and where is compared. */
const anyV = (stream: string): string => stream.replace(/\{t\}v\d/g, '{t}v#');
// FLUSHALL first: Redis keeps the keys of clients gone until they change, and would evict them too.
const EVICTION_CASES: [string, Case][] = [
  ['tracking-table-max-keys lowered: RESP3 pushes, one per key evicted, before the next reply', {
    setup: { a: [['FLUSHALL'], ['HELLO', '3']] },
    mask: anyV,
    steps: [
      a('CLIENT', 'TRACKING', 'ON'), a('MGET', ...v(5)), a(...maxKeys(2)), a('GET', '{t}v6'), b('CONFIG', 'GET', 'tracking-table-max-keys'),
      b('CONFIG', 'GET', 'tracking-*'), b(...msetAll(6)), a(...maxKeys(0)), a('CONFIG', 'GET', 'tracking-table-max-keys'),
    ],
  }],
  ['tracking-table-max-keys lowered: RESP2 REDIRECT gets a message per key evicted', {
    setup: { a: [['FLUSHALL']], c: [['SUBSCRIBE', '__redis__:invalidate']] },
    mask: anyV,
    steps: [a('CLIENT', 'TRACKING', 'ON', 'REDIRECT', '$id:c'), a('MGET', ...v(4)), b(...maxKeys(1)), b(...msetAll(4)), b(...maxKeys(0))],
  }],
  ['tracking-table-max-keys: keys evicted before a pipelined command are told before its reply, after the one before', {
    setup: { a: [['FLUSHALL'], ['HELLO', '3']] },
    mask: anyV,
    steps: [
      a('CLIENT', 'TRACKING', 'ON'), a(...maxKeys(2)), together(['MGET', ...v(3)], ['GET', '{t}v4'], ['GET', '{t}v5'], ['MGET', '{t}v6', '{t}v7'], ['SET', '{t}v8', 'x']),
      b(...msetAll(8)), a(...maxKeys(0)),
    ],
  }],
  ['tracking-table-max-keys: pipelined reads past the limit, RESP2 REDIRECT told in order', {
    setup: { a: [['FLUSHALL']], c: [['SUBSCRIBE', '__redis__:invalidate']] },
    mask: anyV,
    steps: [
      a('CLIENT', 'TRACKING', 'ON', 'REDIRECT', '$id:c'), a(...maxKeys(1)), together(['MGET', ...v(3)], ['GET', '{t}v4'], ['GET', '{t}v5']),
      b(...msetAll(5)), a(...maxKeys(0)),
    ],
  }],
  ["tracking-table-max-keys lowered: a NOLOOP client is not told of keys evicted before its own command, as on Redis", {
    setup: { a: [['FLUSHALL'], ['HELLO', '3']] },
    mask: anyV,
    steps: [
      a('CLIENT', 'TRACKING', 'ON', 'NOLOOP'), a('MGET', ...v(3)), a(...maxKeys(1)), b(...msetAll(3)),
      b(...maxKeys(0)), a('MGET', ...v(4)), b(...maxKeys(2)), b(...msetAll(4)), b(...maxKeys(0)),
    ],
  }],
];

const SET_ONLY = "redis.call('set','{t}key3','bar')";
const READ_OTHER = "return redis.call('get','{t}other')";
const READ_THEN_WRITE = "redis.call('get', KEYS[1]); return redis.call('set', KEYS[2], 'x')";
const sha = (body: string): string => createHash('sha1').update(body).digest('hex');
const K = ['{t}key1', '{t}key2', '{t}key3'];
const FUNCTION = "#!lua name=tlib\nredis.register_function('tget', function(keys) return redis.call('get', keys[1]) end)";
// A script's declared keys are tracked only when it runs a read-only command (the proxy reads the
// script's text); several keys changed by one command are told one by one, in the order written.
const SCRIPT_CASES: [string, Case][] = [
  ['RESP3: a script tracks its declared keys only if it reads; keys told in the order they were written', {
    setup: { a: [['HELLO', '3'], ['FUNCTION', 'LOAD', 'REPLACE', FUNCTION]] },
    steps: [
      a('CLIENT', 'TRACKING', 'ON'), a('EVAL', SET_ONLY, '2', K[0], K[1]), b('MSET', K[0], '1', K[1], '2', K[2], '3'),
      a('EVALSHA', sha(SET_ONLY), '2', K[0], K[1]), b('MSET', K[0], '1', K[1], '2'),
      a('EVAL', READ_OTHER, '2', K[0], K[1]), b('MSET', K[1], '1', K[0], '2', '{t}other', '3'),
      a('EVAL_RO', 'return 1', '1', '{t}ro1'), b('SET', '{t}ro1', '1'),
      a('EVAL_RO', "return redis.call('get', KEYS[1])", '1', '{t}ro2'), b('SET', '{t}ro2', '1'),
      a('EVAL', "redis.log(redis.LOG_DEBUG, 'x'); return redis.sha1hex('')", '1', '{t}e5'), b('SET', '{t}e5', '1'),
      a('EVAL', READ_THEN_WRITE, '2', '{t}e6', '{t}e7'), b('MSET', '{t}e6', '1', '{t}e7', '1'),
      a('FCALL', 'tget', '1', '{t}f1'), b('SET', '{t}f1', '1'),
      a('MGET', K[0], K[1]), b('MSET', K[1], 'a', K[0], 'b'),
      a('MGET', ...K), together(['MULTI'], ['SET', K[2], 'a'], ['SET', K[0], 'b'], ['DEL', K[1]], ['EXEC']), b('MSET', ...K.flatMap((k) => [k, 'x'])),
      a('MGET', ...K), b('DEL', K[2], K[0], K[1]), a('MGET', K[0], K[1]), a('MSET', K[1], 'a', K[0], 'b'),
    ],
  }],
  ['RESP3 NOLOOP: a script\'s writes are the caller\'s own', {
    setup: HELLO3,
    steps: [
      a('CLIENT', 'TRACKING', 'ON', 'NOLOOP'), a('GET', '{t}n1'), a('EVAL', "return redis.call('set', KEYS[1], 'x')", '1', '{t}n1'), b('SET', '{t}n1', 'y'),
      a('EVAL', READ_THEN_WRITE, '2', '{t}n2', '{t}n3'), b('SET', '{t}n3', '1'), b('SET', '{t}n2', '1'),
      a('CLIENT', 'TRACKING', 'OFF'), a('CLIENT', 'TRACKING', 'ON', 'BCAST', 'NOLOOP', 'PREFIX', '{t}b'),
      a('EVAL', "return redis.call('set', KEYS[1], '1')", '1', '{t}b1'), b('SET', '{t}b2', '1'),
    ],
  }],
  ['RESP2 REDIRECT: scripts and multi-key writes', {
    setup: { c: [['SUBSCRIBE', '__redis__:invalidate']] },
    steps: [
      a('CLIENT', 'TRACKING', 'ON', 'REDIRECT', '$id:c'), a('EVAL', SET_ONLY, '2', K[0], K[1]), b('MSET', K[0], '1', K[1], '2'),
      a('EVAL', READ_OTHER, '2', K[0], K[1]), b('MSET', K[1], '1', K[0], '2'),
      a('MGET', ...K), together(['MULTI'], ['SET', K[2], 'a'], ['SET', K[0], 'b'], ['DEL', K[1]], ['EXEC']),
    ],
  }],
];

const push = (...keys: string[]): string => `>2\r\n$10\r\ninvalidate\r\n*${keys.length}\r\n${keys.map((k) => `$${k.length}\r\n${k}\r\n`).join('')}`;
const NULL_PUSH = '>2\r\n$10\r\ninvalidate\r\n_\r\n';
// What Redis changed, asserted of the reference (this back end's version) and then compared: the
// proxy follows the version of its back end.
const VERSION_CASES: [string, Case, (a: string) => void][] = [
  [`a script tracks ${redisAtLeast(7, 2) ? 'the keys its read-only calls read (Redis 7.2+)' : 'its declared keys when it reads (Redis 7.0)'}`, {
    setup: HELLO3,
    steps: [a('CLIENT', 'TRACKING', 'ON'), a('EVAL', READ_OTHER, '2', K[0], K[1]), b('MSET', K[1], '1', K[0], '2', '{t}other', '3')],
  }, (stream) => expect(stream).toContain(redisAtLeast(7, 2) ? `sync-1\r\n${push('{t}other')}$6\r\nsync-2` : `sync-1\r\n${push(K[1])}${push(K[0])}$6\r\nsync-2`)],
  [`own FLUSHALL: the null invalidation ${SERVER.flavor === 'redis' && redisAtLeast(7, 4) ? 'before the reply of a SYNC one (Redis 7.4+), after an ASYNC one' : 'after the reply'}`, {
    setup: HELLO3,
    steps: [a('CLIENT', 'TRACKING', 'ON'), a('GET', '{t}f1'), a('FLUSHALL'), a('GET', '{t}f1'), a('FLUSHALL', 'ASYNC'), a('GET', '{t}f1'), a('FLUSHDB', 'SYNC')],
  }, (stream) => {
    const first = SERVER.flavor === 'redis' && redisAtLeast(7, 4);
    expect(stream).toContain(first ? `${NULL_PUSH}+OK\r\n$6\r\nstep-2` : `+OK\r\n${NULL_PUSH}$6\r\nstep-2`);
    expect(stream).toContain(`+OK\r\n${NULL_PUSH}$6\r\nstep-4`);
    expect(stream).toContain(first ? `${NULL_PUSH}+OK\r\n$6\r\nstep-6` : `+OK\r\n${NULL_PUSH}$6\r\nstep-6`);
  }],
  ['after switching from default mode to BCAST, a key read before is told once, by BCAST; a transaction\'s invalidations follow EXEC\'s reply', {
    setup: HELLO3,
    steps: [
      a('CLIENT', 'TRACKING', 'ON'), b('SET', '{t}s1', '1'), a('GET', '{t}s1'), a('CLIENT', 'TRACKING', 'OFF'), a('CLIENT', 'TRACKING', 'ON', 'BCAST'), b('INCR', '{t}s1'),
      a('CLIENT', 'TRACKING', 'OFF'), a('CLIENT', 'TRACKING', 'ON'), a('MSET', '{t}s2', '1', '{t}s3', '2'), a('GET', '{t}s2'), together(['MULTI'], ['INCR', '{t}s2'], ['GET', '{t}s3'], ['EXEC']),
    ],
  }, (stream) => {
    expect(stream).toContain(`sync-4\r\n${push('{t}s1')}$6\r\nsync-5`);
    expect(stream).toContain(`*2\r\n:2\r\n$1\r\n2\r\n${push('{t}s2')}$7\r\nstep-10`);
  }],
];

describe('what Redis changed in 7.2 and 7.4, as the back end does', () => {
  test.each(VERSION_CASES)('%s', async (_what, { setup, steps }, check) => {
    const want = await runScript(referencePort(), ['a', 'b'], setup, steps);
    check(want.streams.a);
    const got = await runScript(proxy().address.port, ['a', 'b'], setup, steps, want);
    expect(withoutSyncs(got.streams)).toEqual(withoutSyncs(want.streams));
  });
});

describe('CLIENT TRACKING as one Redis, byte for byte', () => {
  test.each([...CASES, ...EVICTION_CASES, ...SCRIPT_CASES])('%s', async (_what, { setup, steps, mask }) => {
    const names = ['a', 'b', ...(Object.keys(setup).includes('c') ? ['c'] : [])];
    const want = await runScript(referencePort(), names, setup, steps);
    const got = await runScript(proxy().address.port, names, setup, steps, want);
    const masked = (streams: Record<string, string>): Record<string, string> =>
      Object.fromEntries(Object.entries(streams).map(([k, x]) => [k, (mask ?? ((y: string) => y))(x)]));
    expect(masked(withoutSyncs(got.streams))).toEqual(masked(withoutSyncs(want.streams)));
  });
});

test("INFO's tracking_total_keys follows tracking-table-max-keys as one Redis's", async () => {
  const conversation = [['FLUSHALL'], ['HELLO', '3'], ['CLIENT', 'TRACKING', 'ON'], ['MGET', ...v(5)], maxKeys(2), ['INFO', 'stats'], ['GET', '{t}v6'], ['INFO', 'stats'], maxKeys(0)];
  const counts = async (port: number): Promise<string[]> => {
    const { replies } = await exchange(port, conversation);
    return [...replies.matchAll(/tracking_total_(keys|items):\d+/g)].map((m) => m[0]);
  };
  const want = await counts(referencePort());
  expect(want).toEqual(['tracking_total_keys:2', 'tracking_total_items:2', 'tracking_total_keys:2', 'tracking_total_items:2']);
  expect(await counts(proxy().address.port)).toEqual(want);
});


/**
 * Redis's own tracking test "Tracking invalidation message of eviction keys should be before
 * response" (tests/unit/tracking.tcl, 7.0): the keys' node over maxmemory after a big SETBIT, a
 * volatile key the client read is evicted before the next command runs, and the client is told
 * before that command's reply. What follows SETBIT: GETBIT alone, as in Redis's test, or
 * (`pipelined`) a read of another key sent with it. Redis's margins (100 KB over, a 200 KB key) scaled
 * up tenfold: the conversation's own connection must not take the node past the limit first.
 */
async function evictionBeforeReply(port: number, node: RedisNode, pipelined: boolean): Promise<string> {
  const memory = String(await node.command('INFO', 'memory'));
  const field = (name: string): number => Number(new RegExp(`${name}:(\\d+)`).exec(memory)?.[1]);
  const limit = field('used_memory') - field('mem_not_counted_for_evict') + 1024 * 1024;
  await node.command('CONFIG', 'SET', 'maxmemory-policy', 'volatile-random');
  await node.command('CONFIG', 'SET', 'maxmemory', String(limit));
  try {
    const setbit = ['SETBIT', '{t}big-key', '16000000', '0'];
    const run = await runScript(port, ['a'], { a: [['HELLO', '3'], ['CLIENT', 'TRACKING', 'ON']] }, [
      a('SETEX', '{t}volatile-key', '10000', 'x'),
      a('GET', '{t}volatile-key'),
      ...(pipelined ? [together(setbit, ['GET', '{t}other'])] : [a(...setbit), a('GETBIT', '{t}big-key', '0')]),
    ]);
    return run.streams.a;
  } finally {
    await node.command('CONFIG', 'SET', 'maxmemory', '0');
    await node.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    await node.command('DEL', '{t}big-key', '{t}volatile-key');
  }
}

const EVICTED_PUSH = '>2\r\n$10\r\ninvalidate\r\n*1\r\n$15\r\n{t}volatile-key\r\n';

/** The master of `nodes` that holds the `{t}` keys. */
async function ownerOfT(nodes: RedisNode[]): Promise<RedisNode> {
  for (const n of nodes) if (typeof (await n.command('EXISTS', '{t}big-key').catch(() => null)) === 'number') return n;
  throw new Error('no master owns {t}');
}

test.each([false, true])('a key a node evicts for maxmemory: told before the reply of the command after the one that filled it, as one Redis (pipelined: %s)', async (pipelined) => {
  const want = await evictionBeforeReply(referencePort(), reference().masters[0], pipelined);
  // SETBIT's reply, the evicted key's push, then the next reply (the GET's, or the script's marker PING).
  expect(want).toContain(`:0\r\n${EVICTED_PUSH}${pipelined ? '_\r\n' : '$6\r\nstep-2\r\n'}`);
  const got = await evictionBeforeReply(proxy().address.port, await ownerOfT(cluster().masters), pipelined);
  expect(got).toEqual(want);
});

/**
 * Redis's own test "Tracking gets notification on tracking table key eviction" (tests/unit/
 * tracking.tcl): a NOLOOP client redirecting to a RESP2 subscriber reads two keys, lowers
 * tracking-table-max-keys to 1 and sends nothing more; the cron evicts one key and the subscriber
 * is told. (A command of the NOLOOP client itself would evict too, without telling it: see above.)
 */
async function evictionNotice(port: number): Promise<string> {
  const open = async (): Promise<{ socket: net.Socket; got: () => string; until: (re: RegExp) => Promise<void> }> => {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    let text = '';
    const waiters: (() => void)[] = [];
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      for (const w of waiters.splice(0)) w();
    });
    const until = (re: RegExp): Promise<void> =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${re} not within 5 s; received ${JSON.stringify(text)}`)), 5000);
        const check = (): void => (re.test(text) ? (clearTimeout(timer), resolve()) : void waiters.push(check));
        check();
      });
    return { socket, got: () => text, until };
  };
  const [sub, r] = [await open(), await open()];
  try {
    sub.socket.write(encodeRequest(['CLIENT', 'ID']) + encodeRequest(['SUBSCRIBE', '__redis__:invalidate']));
    await sub.until(/:1\r\n$/);
    const id = /^:(\d+)/.exec(sub.got())?.[1] ?? '';
    r.socket.write([['FLUSHALL'], ['CLIENT', 'TRACKING', 'ON', 'REDIRECT', id, 'NOLOOP'], ['MSET', '{t}v1', '1', '{t}v2', '2'], ['MGET', '{t}v1', '{t}v2'], maxKeys(1)].map(encodeRequest).join(''));
    await r.until(/\+OK\r\n\+OK\r\n\+OK\r\n\*2\r\n\$1\r\n1\r\n\$1\r\n2\r\n\+OK\r\n$/);
    await sub.until(/message\r\n\$20\r\n__redis__:invalidate\r\n\*1\r\n\$5\r\n\{t\}v\d\r\n$/);
    return sub.got().slice(sub.got().indexOf('*3\r\n$7\r\nmessage'));
  } finally {
    r.socket.write(encodeRequest(maxKeys(0)));
    await r.until(/\+OK\r\n\+OK\r\n$/).catch(() => undefined);
    sub.socket.destroy();
    r.socket.destroy();
  }
}

test('tracking-table-max-keys lowered to 1 by a NOLOOP client that then waits: the cron evicts a key and its REDIRECT subscriber is told, as one Redis', async () => {
  const want = anyV(await evictionNotice(referencePort()));
  expect(want).toBe('*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$5\r\n{t}v#\r\n');
  expect(anyV(await evictionNotice(proxy().address.port))).toBe(want);
});
