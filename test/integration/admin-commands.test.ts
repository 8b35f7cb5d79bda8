// Administrative and keyless commands through a real slotproxy in front of a 3-master/3-replica Redis
// Cluster (issue 12, items 6-10): CONFIG on every node, container subcommands routed by their key,
// RANDOMKEY over the whole keyspace, SCRIPT EXISTS/KILL and FUNCTION KILL, and the merged INFO.
// "One Redis" is a single-node Redis Cluster owning every slot (`ref`): where it also answers, the
// proxy's reply is compared with its reply.

import { createHash } from 'node:crypto';
import Redis from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { useReferenceNode } from '../helpers/reference-node';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { runRedisCli } from '../../cmd/sandbox/redis-cli';
import { useProxy, useRingProxy } from '../helpers/proxy';
import { keyPerMaster, waitFor } from '../helpers/master-keys';
import { errorOf } from '../helpers/reply-error';
import { exchange, splitReplies } from '../helpers/raw-exchange';
import { SERVER, busyText, nopermText, redisAtLeast } from '../helpers/server-version';

const DEBUG = ['--enable-debug-command', 'yes'];
// One lane per node: every client of the proxy shares one connection to each node, so a SCRIPT KILL
// that used it would wait behind the busy script it has to kill.
const h = useProxy({ backend: { connectionsPerNode: 1 } }, { extraArgs: DEBUG });

const one = useReferenceNode({ extraArgs: DEBUG });
const refNode = one.node;
const refConnect = one.connect;

/** A client of the proxy and one of the reference node, for every test. */
let c: Redis;
let r: Redis;

beforeAll(async () => {
  c = h.connect();
  r = refConnect();
}, 60_000);

type Outcome = unknown;

/** A reply, or `{ err: text }` for an error reply. */
async function outcome(p: Promise<unknown>): Promise<Outcome> {
  try {
    return await p;
  } catch (err) {
    return { err: (err as Error).message };
  }
}

/** The same command through the proxy and on the reference node. */
async function both(proxy: Redis, reference: Redis, args: (string | number)[]): Promise<[Outcome, Outcome]> {
  const [name, ...rest] = args;
  return [await outcome(proxy.call(String(name), ...rest)), await outcome(reference.call(String(name), ...rest))];
}

/** Error text of a direct node command (sendCommand rejects on an error reply). */
async function nodeError(node: RedisNode, ...args: (string | number)[]): Promise<string> {
  return errorOf(node.command(...args));
}

/** CONFIG GET's flat pairs as an object (the order of the pairs is the node's dict order). */
function pairs(reply: unknown): Record<string, string> {
  const list = reply as string[];
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i]] = list[i + 1];
  return out;
}

const sha1 = (body: string): string => createHash('sha1').update(body).digest('hex');

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A key whose slot a given master serves, made from `prefix` and a counter (no hash tag). */
async function keysOn(node: RedisNode, prefix: string, n: number): Promise<string[]> {
  const ranges = (await h.cluster().slots()).filter((r) => r.master.port === node.port);
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) {
    const key = `${prefix}:${i}`;
    const slot = calculateSlot(key);
    if (ranges.some((r) => slot >= r.start && slot <= r.end)) out.push(key);
  }
  return out;
}

function infoField(info: string, field: string): string | undefined {
  return new RegExp(`^${escape(field)}:(.*)$`, 'm').exec(info.replace(/\r/g, ''))?.[1];
}

function headers(info: string): string[] {
  return info.split('\r\n').filter((l) => l.startsWith('# '));
}

/** Field names of one section, in order. */
function fieldsOf(info: string, section: string): string[] {
  const body = info.split('\r\n\r\n').find((s) => s.startsWith(`# ${section}\r\n`)) ?? '';
  return body.split('\r\n').slice(1).filter((l) => l !== '').map((l) => l.slice(0, l.indexOf(':')));
}

// ---------------------------------------------------------------------------
describe('CONFIG', () => {
  test('CONFIG GET answers as one server: one node\'s values', async () => {
    for (const args of [
      ['CONFIG', 'GET', 'maxmemory-policy'],
      ['CONFIG', 'GET', 'list-max-listpack-size', 'notify-keyspace-events', 'lua-time-limit'],
      ['CONFIG', 'GET', 'hash-max-*'],
      ['CONFIG', 'GET', 'no-such-parameter'],
    ]) {
      const [p, want] = await both(c, r, args);
      expect(pairs(p)).toEqual(pairs(want));
    }
  });

  test('arity, unknown subcommands and HELP: Redis\'s replies to the letter', async () => {
    for (const args of [
      ['CONFIG'],
      ['CONFIG', 'GET'],
      ['CONFIG', 'SET', 'maxmemory'],
      ['CONFIG', 'RESETSTAT', 'x'],
      ['CONFIG', 'REWRITE', 'x'],
      ['CONFIG', 'HELP', 'x'],
      ['CONFIG', 'FOO'],
      ['CONFIG', 'HELP'],
    ]) {
      const [p, want] = await both(c, r, args);
      expect([args, p]).toEqual([args, want]);
    }
    expect(await both(c, r, ['CONFIG'])).toEqual([
      { err: "ERR wrong number of arguments for 'config' command" },
      { err: "ERR wrong number of arguments for 'config' command" },
    ]);
  });

  test('a CONFIG SET the first master refuses: Redis\'s error, the node named, no node changed', async () => {
    const masters = new Set(h.cluster().masters.map((m) => m.address));
    for (const args of [
      ['CONFIG', 'SET', 'no-such-parameter', 'x'],
      ['CONFIG', 'SET', 'maxmemory', 'abc'],
      ['CONFIG', 'SET', 'maxmemory', '1', 'maxmemory', '2'],
      ['CONFIG', 'SET', 'maxmemory', '1', 'x'],
    ]) {
      const [p, want] = (await both(c, r, args)) as [{ err: string }, { err: string }];
      const m = new RegExp(`^${escape(want.err)} \\(node (127\\.0\\.0\\.1:\\d+); no node was changed\\)$`).exec(p.err);
      expect([args, m === null ? p.err : 'matches']).toEqual([args, 'matches']);
      expect(masters.has(m![1])).toBe(true);
    }
    expect(await both(c, r, ['CONFIG', 'GET', 'maxmemory'])).toEqual([['maxmemory', '0'], ['maxmemory', '0']]);
    for (const n of h.cluster().nodes) expect(await n.command('CONFIG', 'GET', 'maxmemory')).toEqual(['maxmemory', '0']);
  });

  test('CONFIG SET reaches every node, masters and replicas, and takes effect there', async () => {
    const settings = ['list-max-listpack-size', '4', 'notify-keyspace-events', 'KEA', 'lua-time-limit', '1234'];
    try {
      expect(await both(c, r, ['CONFIG', 'SET', ...settings])).toEqual(['OK', 'OK']);
      expect(h.cluster().nodes.length).toBe(6);
      for (const n of h.cluster().nodes) {
        expect(pairs(await n.command('CONFIG', 'GET', 'list-max-listpack-size', 'notify-keyspace-events', 'lua-time-limit'))).toEqual({
          'list-max-listpack-size': '4',
          'notify-keyspace-events': 'AKE',
          'lua-time-limit': '1234',
        });
      }
      const [p, want] = await both(c, r, ['CONFIG', 'GET', 'notify-keyspace-events', 'lua-time-limit', 'busy-reply-threshold']);
      expect(pairs(p)).toEqual(pairs(want));
      // list-max-listpack-size 4: five elements make two quicklist nodes, on every master as on one Redis.
      const quicklist = async (node: RedisNode, key: string): Promise<string | undefined> =>
        / (ql_nodes:\d+) .*(ql_listpack_max:-?\d+) /.exec(String(await node.command('DEBUG', 'OBJECT', key)))?.slice(1).join(' ');
      for (const { key, node } of await keyPerMaster(h.cluster(), 'cfg-list')) {
        await c.call('RPUSH', key, 'a', 'b', 'c', 'd', 'e');
        await r.call('RPUSH', key, 'a', 'b', 'c', 'd', 'e');
        expect(await quicklist(node, key)).toBe('ql_nodes:2 ql_listpack_max:4');
        expect(await quicklist(refNode(), key)).toBe('ql_nodes:2 ql_listpack_max:4');
      }
      // notify-keyspace-events KEA: every master publishes its own keys' events, and a subscriber
      // of the proxy hears them all, as a subscriber of one Redis would.
      const subscriber = h.connect();
      const events: string[] = [];
      subscriber.on('pmessage', (_p: string, channel: string, message: string) => events.push(`${channel} ${message}`));
      await subscriber.psubscribe('__keyevent@0__:set');
      const keys = (await keyPerMaster(h.cluster(), 'cfg-event')).map((k) => k.key);
      for (const key of keys) await c.call('SET', key, 'v');
      await waitFor('3 keyspace events', async () => events.length === 3, 5_000);
      expect(events.sort()).toEqual(keys.map((k) => `__keyevent@0__:set ${k}`).sort());
    } finally {
      await c.call('CONFIG', 'SET', 'list-max-listpack-size', '-2', 'notify-keyspace-events', '', 'lua-time-limit', '5000');
      await r.call('CONFIG', 'SET', 'list-max-listpack-size', '-2', 'notify-keyspace-events', '', 'lua-time-limit', '5000');
    }
    for (const n of h.cluster().nodes) expect(await n.command('CONFIG', 'GET', 'lua-time-limit')).toEqual(['lua-time-limit', '5000']);
  });

  test('a replica that refuses CONFIG SET: every node is set back, and the error names it', async () => {
    const replica = h.cluster().replicas[0];
    await replica.command('ACL', 'SETUSER', 'default', '-config|set');
    try {
      const msg = await errorOf(c.call('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru', 'hz', '11'));
      expect(msg).toBe(`${nopermText('command', 'default', 'config|set')} (node ${replica.address}; the nodes that took it were set back)`);
    } finally {
      await replica.command('ACL', 'SETUSER', 'default', '+config|set');
    }
    for (const n of h.cluster().nodes) {
      expect(pairs(await n.command('CONFIG', 'GET', 'maxmemory-policy', 'hz'))).toEqual({ 'maxmemory-policy': 'noeviction', hz: '10' });
    }
    // The same command works once the replica takes it again; set back by hand.
    expect(await c.call('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru', 'hz', '11')).toBe('OK');
    for (const n of h.cluster().nodes) expect(await n.command('CONFIG', 'GET', 'hz')).toEqual(['hz', '11']);
    expect(await c.call('CONFIG', 'SET', 'maxmemory-policy', 'noeviction', 'hz', '10')).toBe('OK');
  });

  test('CONFIG RESETSTAT resets every node\'s statistics', async () => {
    for (const n of h.cluster().nodes) await nodeError(n, 'NO-SUCH-COMMAND');
    for (const n of h.cluster().nodes) expect(Number((await n.info('stats')).get('total_error_replies'))).toBeGreaterThan(0);
    expect(await both(c, r, ['CONFIG', 'RESETSTAT'])).toEqual(['OK', 'OK']);
    for (const n of h.cluster().nodes) {
      expect((await n.info('stats')).get('total_error_replies')).toBe('0');
      expect(await n.command('INFO', 'errorstats')).toBe('# Errorstats\r\n');
    }
  });

  test('CONFIG RESETSTAT resets the proxy\'s own counters too', async () => {
    await errorOf(c.call('MGET', 'a', 'b')); // a CROSSSLOT refusal
    const proxyField = async (field: string): Promise<number> => Number(infoField(String(await c.call('INFO', 'proxy')), field));
    expect(await proxyField('proxy_total_commands_processed')).toBeGreaterThanOrEqual(2);
    expect(await proxyField('crossslot_errors')).toBeGreaterThan(0);
    expect(await c.call('CONFIG', 'RESETSTAT')).toBe('OK');
    // Only the INFO itself counted since.
    expect(await proxyField('proxy_total_commands_processed')).toBe(1);
    expect(await proxyField('crossslot_errors')).toBe(0);
  });

  test('CONFIG REWRITE asks every node; nodes without a config file refuse as Redis does, named', async () => {
    const [p, want] = (await both(c, r, ['CONFIG', 'REWRITE'])) as [{ err: string }, { err: string }];
    expect(want.err).toBe('ERR The server is running without a config file');
    expect(p.err).toMatch(new RegExp(`^${escape(want.err)} \\(node 127\\.0\\.0\\.1:\\d+ and 5 more; done on 0 of 6 nodes\\)$`));
  });

  test('redis-cli CONFIG GET prints what it prints against one Redis', async () => {
    const args = ['CONFIG', 'GET', 'maxmemory-policy'];
    expect(await runRedisCli(['-p', String(h.proxy().address.port), ...args])).toBe(await runRedisCli(['-p', String(refNode().port), ...args]));
  });
});

// ---------------------------------------------------------------------------
describe('container commands route by their key', () => {
  test('MEMORY USAGE and OBJECT ENCODING/REFCOUNT/IDLETIME/FREQ answer from the key\'s master', async () => {
    for (const { key, node } of await keyPerMaster(h.cluster(), 'mem')) {
      await c.call('SET', key, 'x'.repeat(100));
      await r.call('SET', key, 'x'.repeat(100));
      for (const args of [
        ['MEMORY', 'USAGE', key],
        ['MEMORY', 'USAGE', key, 'SAMPLES', '0'],
        ['OBJECT', 'ENCODING', key],
        ['OBJECT', 'REFCOUNT', key],
      ]) {
        const direct = await node.command(...args);
        expect([args, await c.call(args[0], ...args.slice(1))]).toEqual([args, direct]);
        expect([args, await r.call(args[0], ...args.slice(1))]).toEqual([args, direct]);
      }
      // Whole seconds of the node's LRU clock: the read through the proxy comes later, by a tick at most.
      const idle = Number(await node.command('OBJECT', 'IDLETIME', key));
      expect(await c.call('OBJECT', 'IDLETIME', key)).toBeGreaterThanOrEqual(idle);
      expect(await c.call('OBJECT', 'IDLETIME', key)).toBeLessThanOrEqual(idle + 1);
      const [p, want] = await both(c, r, ['OBJECT', 'FREQ', key]);
      expect(p).toEqual(want);
      expect(p).toEqual({ err: expect.stringMatching(/^ERR An LFU maxmemory policy is not selected/) });
    }
    expect(await c.call('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lfu')).toBe('OK');
    try {
      for (const { key, node } of await keyPerMaster(h.cluster(), 'mem')) {
        expect(await c.call('OBJECT', 'FREQ', key)).toEqual(await node.command('OBJECT', 'FREQ', key));
      }
    } finally {
      expect(await c.call('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')).toBe('OK');
    }
  });

  test('XINFO STREAM, GROUPS and CONSUMERS answer from the key\'s master', async () => {
    for (const { key, node } of await keyPerMaster(h.cluster(), 'xinfo')) {
      for (const cl of [c, r]) {
        await cl.call('XADD', key, '1-1', 'f', 'v');
        await cl.call('XADD', key, '2-1', 'f', 'w');
        await cl.call('XGROUP', 'CREATE', key, 'g', '0');
        await cl.call('XREADGROUP', 'GROUP', 'g', 'alice', 'COUNT', '1', 'STREAMS', key, '>');
      }
      for (const args of [
        ['XINFO', 'STREAM', key],
        ['XINFO', 'GROUPS', key],
      ]) {
        const [p, want] = await both(c, r, args);
        expect([args, p]).toEqual([args, want]);
        expect(p).toEqual(await node.command(...args));
      }
      // FULL carries delivery times: the same as the node's own reply.
      expect(await c.call('XINFO', 'STREAM', key, 'FULL')).toEqual(await node.command('XINFO', 'STREAM', key, 'FULL'));
      const consumers = (await c.call('XINFO', 'CONSUMERS', key, 'g')) as unknown[][];
      expect(consumers.map((e) => e.slice(0, 4))).toEqual([['name', 'alice', 'pending', 1]]);
    }
  });

  test('errors and nil replies as one Redis gives them', async () => {
    for (const args of [
      ['MEMORY', 'USAGE'],
      ['MEMORY', 'USAGE', 'nokey'],
      ['MEMORY', 'USAGE', 'nokey', 'SAMPLES'],
      ['MEMORY', 'FOO'],
      ['OBJECT', 'ENCODING', 'nokey'],
      ['OBJECT', 'ENCODING'],
      ['OBJECT', 'FOO', 'k'],
      ['XINFO', 'STREAM', 'nokey'],
      ['XINFO'],
      ['XINFO', 'GROUPS', 'nokey'],
    ]) {
      const [p, want] = await both(c, r, args);
      expect([args, p]).toEqual([args, want]);
    }
  });

  test('keyless subcommands: HELP and MEMORY PURGE as on one Redis, the allocator report refused clearly', async () => {
    for (const args of [['OBJECT', 'HELP'], ['MEMORY', 'HELP'], ['XINFO', 'HELP'], ['MEMORY', 'PURGE']]) {
      const [p, want] = await both(c, r, args);
      expect([args, p]).toEqual([args, want]);
    }
    expect(await errorOf(c.call('MEMORY', 'MALLOC-STATS'))).toBe(
      "ERR slotproxy does not support 'MEMORY': MEMORY MALLOC-STATS is one process's allocator report; run it on the node itself",
    );
  });
});

// ---------------------------------------------------------------------------
describe('the server\'s reports, merged from every master\'s', () => {
  /** Types, array lengths and errors of replies: what two servers' reports share. */
  function shape(reply: unknown): unknown {
    if (Array.isArray(reply)) return reply.map(shape);
    if (reply !== null && typeof reply === 'object' && 'err' in reply) return reply;
    return typeof reply;
  }

  afterEach(async () => {
    for (const cl of [c, r]) {
      await cl.call('CONFIG', 'SET', 'slowlog-log-slower-than', '10000', 'latency-monitor-threshold', '0');
      await cl.call('SLOWLOG', 'RESET');
      await cl.call('LATENCY', 'RESET');
    }
  });

  test('SLOWLOG GET/LEN/RESET: every master\'s entries, newest first, ids unique; errors as one Redis', async () => {
    for (const cl of [c, r]) {
      expect(await cl.call('SLOWLOG', 'RESET')).toBe('OK');
      expect(await cl.call('CONFIG', 'SET', 'slowlog-log-slower-than', '0')).toBe('OK');
    }
    const keys = await keyPerMaster(h.cluster(), 'slow');
    for (const { key } of keys) {
      await c.call('SET', key, 'v');
      await r.call('SET', key, 'v');
    }
    // Two entries of one form (the newest may be another command: the proxy's own PINGs and
    // topology reads run on the masters too, logged at slower-than 0, so arguments differ in number).
    const [p, want] = await both(c, r, ['SLOWLOG', 'GET', '2']);
    const entries = (reply: unknown): unknown => (reply as unknown[][]).map((e) => e.map((field) => (Array.isArray(field) ? 'arguments' : shape(field))));
    expect(entries(p)).toEqual(entries(want));
    const all = (await c.call('SLOWLOG', 'GET', '-1')) as [number, number, number, string[], string, string][];
    const sets = all.filter((e) => e[3][0] === 'SET').map((e) => e[3][1]);
    expect(sets.sort()).toEqual(keys.map((k) => k.key).sort());
    expect(new Set(all.map((e) => e[0])).size).toBe(all.length);
    const times = all.map((e) => e[1]);
    expect(times).toEqual([...times].sort((a, b) => b - a));
    // The ids are stable: the same entry has the same id in a later call.
    const again = (await c.call('SLOWLOG', 'GET', '-1')) as [number, number, number, string[]][];
    for (const e of all) expect(again.find((x) => x[0] === e[0])?.[3]).toEqual(e[3]);

    const len = Number(await c.call('SLOWLOG', 'LEN'));
    const direct = await Promise.all(h.cluster().masters.map((m) => m.command('SLOWLOG', 'LEN')));
    // Each master logged the proxy's SLOWLOG LEN after answering it.
    expect(direct.reduce((a: number, n) => a + Number(n), 0)).toBe(len + h.cluster().masters.length);
    expect(await both(c, r, ['CONFIG', 'SET', 'slowlog-log-slower-than', '10000'])).toEqual(['OK', 'OK']);
    expect(await both(c, r, ['SLOWLOG', 'RESET'])).toEqual(['OK', 'OK']);
    expect(await both(c, r, ['SLOWLOG', 'LEN'])).toEqual([0, 0]);
    expect(await both(c, r, ['SLOWLOG', 'GET'])).toEqual([[], []]);
    for (const args of [['SLOWLOG', 'GET', 'x'], ['SLOWLOG', 'GET', '-2'], ['SLOWLOG', 'FOO'], ['SLOWLOG', 'HELP'], ['SLOWLOG', 'LEN', 'x']]) {
      const [got, wanted] = await both(c, r, args);
      expect([args, got]).toEqual([args, wanted]);
    }
  });

  test('LATENCY LATEST/HISTORY/RESET/DOCTOR: the spikes of every master as one server\'s', async () => {
    for (const cl of [c, r]) expect(await cl.call('CONFIG', 'SET', 'latency-monitor-threshold', '1')).toBe('OK');
    const [m1, m2] = h.cluster().masters;
    await m1.command('DEBUG', 'SLEEP', '0.02');
    await m2.command('DEBUG', 'SLEEP', '0.06');
    await refNode().command('DEBUG', 'SLEEP', '0.06');
    const [latest, wantLatest] = (await both(c, r, ['LATENCY', 'LATEST'])) as [unknown[][], unknown[][]];
    expect(shape(latest)).toEqual(shape(wantLatest));
    expect(latest[0][0]).toBe('command');
    expect(latest[0][3]).toBeGreaterThanOrEqual(60);
    const history = (await c.call('LATENCY', 'HISTORY', 'command')) as [number, number][];
    const direct = [...((await m1.command('LATENCY', 'HISTORY', 'command')) as [number, number][]), ...((await m2.command('LATENCY', 'HISTORY', 'command')) as [number, number][])];
    expect(history.map((s) => s[0])).toEqual([...new Set(direct.map((s) => s[0]))].sort((a, b) => a - b));
    expect(Math.max(...history.map((s) => s[1]))).toBe(Math.max(...direct.map((s) => s[1])));
    const [doctor, wantDoctor] = await both(c, r, ['LATENCY', 'DOCTOR']);
    expect(shape(doctor)).toEqual(shape(wantDoctor));
    // No more samples from here on (a loaded machine makes any command a spike).
    expect(await both(c, r, ['CONFIG', 'SET', 'latency-monitor-threshold', '0'])).toEqual(['OK', 'OK']);
    // Two masters hold `command`: one server resets it once.
    const events = ((await c.call('LATENCY', 'LATEST')) as unknown[]).length;
    expect(await c.call('LATENCY', 'RESET')).toBe(events);
    expect(await r.call('LATENCY', 'RESET')).toBeGreaterThanOrEqual(1);
    expect(await both(c, r, ['LATENCY', 'LATEST'])).toEqual([[], []]);
    for (const args of [['LATENCY', 'DOCTOR'], ['LATENCY', 'HISTORY', 'command'], ['LATENCY', 'RESET', 'command', 'nope'], ['LATENCY', 'HELP'], ['LATENCY', 'FOO']]) {
      const [got, wanted] = await both(c, r, args);
      expect([args, got]).toEqual([args, wanted]);
    }
    expect(await errorOf(c.call('LATENCY', 'GRAPH', 'command'))).toBe(
      "ERR slotproxy does not support 'LATENCY': LATENCY GRAPH and HISTOGRAM draw one node's samples; run them on the node itself",
    );
  });

  test('MEMORY STATS summed over the masters, MEMORY DOCTOR, in RESP2 and RESP3 as one Redis shapes them', async () => {
    for (const { key } of await keyPerMaster(h.cluster(), 'memstats')) await c.call('SET', key, 'v');
    const stats = (await c.call('MEMORY', 'STATS')) as unknown[];
    const want = (await r.call('MEMORY', 'STATS')) as unknown[];
    const names = (list: unknown[]): unknown[] => list.filter((_, i) => i % 2 === 0);
    expect(names(stats)).toEqual(names(want));
    expect(shape(stats)).toEqual(shape(want));
    const field = (list: unknown[], name: string): unknown => list[list.indexOf(name) + 1];
    expect(field(stats, 'keys.count')).toBe(await c.call('DBSIZE'));
    const direct = await Promise.all(h.cluster().masters.map(async (m) => field((await m.command('MEMORY', 'STATS')) as unknown[], 'startup.allocated') as number));
    expect(field(stats, 'startup.allocated')).toBe(direct.reduce((a, b) => a + b, 0));
    const [doctor, wantDoctor] = await both(c, r, ['MEMORY', 'DOCTOR']);
    expect(shape(doctor)).toEqual(shape(wantDoctor));
    // RESP3: a map (db.0 a map inside), doubles, and the doctor's verbatim string.
    const resp3 = async (port: number): Promise<string[]> => {
      const { replies } = await exchange(port, [['HELLO', '3'], ['MEMORY', 'STATS'], ['MEMORY', 'DOCTOR']]);
      return splitReplies(replies).slice(1).map((f) => f.replace(/(\r\n[:,$=][^\r]*)/g, (m) => m.slice(0, 3)).replace(/\r\n[^%*:,$=][^\r]*/g, ''));
    };
    expect(await resp3(h.proxy().address.port)).toEqual(await resp3(refNode().port));
    for (const args of [['MEMORY', 'STATS', 'x'], ['MEMORY', 'DOCTOR', 'x']]) {
      const [got, wanted] = await both(c, r, args);
      expect([args, got]).toEqual([args, wanted]);
    }
    expect(await errorOf(c.call('MEMORY', 'MALLOC-STATS'))).toBe(
      "ERR slotproxy does not support 'MEMORY': MEMORY MALLOC-STATS is one process's allocator report; run it on the node itself",
    );
  });

  test('LASTSAVE is the oldest master\'s; SAVE, BGSAVE and BGREWRITEAOF reach every master', async () => {
    const masters = h.cluster().masters;
    const idle = async (): Promise<boolean> => {
      const infos = await Promise.all(masters.map((m) => m.info('persistence')));
      return infos.every((i) => i.get('rdb_bgsave_in_progress') === '0' && i.get('aof_rewrite_in_progress') === '0' && i.get('aof_rewrite_scheduled') === '0');
    };
    await waitFor('no background save', idle);
    const lastsaves = async (): Promise<number[]> => Promise.all(masters.map(async (m) => Number(await m.command('LASTSAVE'))));
    expect(await c.call('LASTSAVE')).toBe(Math.min(...(await lastsaves())));
    expect(await both(c, r, ['SAVE'])).toEqual(['OK', 'OK']);
    const saved = await lastsaves();
    expect(await c.call('LASTSAVE')).toBe(Math.min(...saved));
    expect(await both(c, r, ['BGSAVE'])).toEqual(['Background saving started', 'Background saving started']);
    await waitFor('the background saves', idle);
    await waitFor('the reference\'s background save', async () => (await refNode().info('persistence')).get('rdb_bgsave_in_progress') === '0');
    expect(await both(c, r, ['BGREWRITEAOF'])).toEqual(['Background append only file rewriting started', 'Background append only file rewriting started']);
    await waitFor('the rewrites', idle);
    // A master already saving refuses: its error, named, and on how many it was done.
    await masters[1].command('BGSAVE');
    const refused = await errorOf(c.call('BGSAVE'));
    expect(refused).toContain('ERR Background save already in progress');
    expect(refused).toContain(`${masters[1].host}:${masters[1].port}`);
    await waitFor('the background saves', idle);
    for (const args of [['LASTSAVE', 'x'], ['SAVE', 'x'], ['BGSAVE', 'x'], ['BGREWRITEAOF', 'x']]) {
      const [got, wanted] = await both(c, r, args);
      expect([args, got]).toEqual([args, wanted]);
    }
  });

  test('ROLE answers as a master; MODULE LIST the modules every master has', async () => {
    for (const args of [['ROLE'], ['ROLE', 'x'], ['MODULE', 'LIST'], ['MODULE', 'HELP'], ['MODULE', 'LIST', 'x']]) {
      const [got, wanted] = await both(c, r, args);
      expect([args, got]).toEqual([args, wanted]);
    }
    expect(await c.call('ROLE')).toEqual(['master', 0, []]);
    expect(await errorOf(c.call('MODULE', 'LOAD', '/nowhere.so'))).toBe(
      "ERR slotproxy does not support 'MODULE': modules are loaded into each node process; load or unload them on every node",
    );
  });
});

// ---------------------------------------------------------------------------
describe('RANDOMKEY', () => {
  beforeEach(async () => {
    expect(await c.call('FLUSHALL')).toBe('OK');
    expect(await r.call('FLUSHALL')).toBe('OK');
  });

  test('nil when the keyspace is empty, as one Redis', async () => {
    expect(await both(c, r, ['RANDOMKEY'])).toEqual([null, null]);
  });

  test('a key of one master only is found whichever master is asked first', async () => {
    const [{ key }] = await keyPerMaster(h.cluster(), 'only');
    await c.call('SET', key, 'v');
    for (let i = 0; i < 20; i++) expect(await c.call('RANDOMKEY')).toBe(key);
  });

  test('keys of every master come back, and only existing keys', async () => {
    const owners = new Map<string, number>();
    for (const [i, m] of h.cluster().masters.entries()) {
      for (const key of await keysOn(m, `rk${i}`, 10)) {
        await c.call('SET', key, 'v');
        owners.set(key, i);
      }
    }
    const seen = new Set<number>();
    for (let i = 0; i < 300; i++) {
      const key = (await c.call('RANDOMKEY')) as string;
      expect(owners.has(key)).toBe(true);
      seen.add(owners.get(key)!);
    }
    expect(seen).toEqual(new Set([0, 1, 2]));
  });

  test('a master whose keys all expired is left out; nil when every master turned empty', async () => {
    const [a, b] = h.cluster().masters;
    await a.command('DEBUG', 'SET-ACTIVE-EXPIRE', '0');
    await refNode().command('DEBUG', 'SET-ACTIVE-EXPIRE', '0');
    try {
      // 200 keys on A that expired but are still counted by DBSIZE, one live key on B.
      for (const key of await keysOn(a, 'gone', 200)) await a.command('SET', key, 'v', 'PX', '1');
      await refNode().command('SET', 'gone', 'v', 'PX', '1');
      await new Promise((res) => setTimeout(res, 20));
      expect(await a.command('DBSIZE')).toBe(200);
      // One Redis whose only key expired answers nil.
      expect(await r.call('RANDOMKEY')).toBeNull();
      const [live] = await keysOn(b, 'live', 1);
      await c.call('SET', live, 'v');
      expect(await c.call('RANDOMKEY')).toBe(live);
      // RANDOMKEY on A deleted what it found expired, so A is empty now.
      await c.call('DEL', live);
      for (const key of await keysOn(a, 'gone2', 50)) await a.command('SET', key, 'v', 'PX', '1');
      await new Promise((res) => setTimeout(res, 20));
      expect(await c.call('RANDOMKEY')).toBeNull();
      expect(await a.command('DBSIZE')).toBe(0);
    } finally {
      await a.command('DEBUG', 'SET-ACTIVE-EXPIRE', '1');
      await refNode().command('DEBUG', 'SET-ACTIVE-EXPIRE', '1');
    }
  });

  test('RESP3: the nil is RESP3\'s null, as one Redis sends it (raw socket)', async () => {
    const requests = [['HELLO', '3'], ['RANDOMKEY']];
    const proxied = (await exchange(h.proxy().address.port, requests)).replies;
    const direct = (await exchange(refNode().port, requests)).replies;
    expect(proxied.endsWith('\r\n_\r\n')).toBe(true);
    expect(direct.endsWith('\r\n_\r\n')).toBe(true);
  });
});

// ---------------------------------------------------------------------------
describe('SCAN fills its COUNT across masters', () => {
  beforeEach(async () => {
    expect(await c.call('FLUSHALL')).toBe('OK');
    expect(await r.call('FLUSHALL')).toBe('OK');
  });

  /** SCAN's reply with its keys sorted (hash-table order differs between servers). */
  async function scanOnce(cl: Redis, args: string[]): Promise<[string, string[]]> {
    const [cursor, keys] = (await cl.call('SCAN', ...args)) as [string, string[]];
    return [cursor, [...keys].sort()];
  }

  test('a keyspace smaller than COUNT comes back whole, cursor 0, in one call: as one Redis', async () => {
    const keys = (await keyPerMaster(h.cluster(), 'small')).map((k) => k.key);
    for (const cl of [c, r]) for (const key of keys) await cl.call('SET', key, 'v');
    const [p, want] = [await scanOnce(c, ['0']), await scanOnce(r, ['0'])];
    expect(p).toEqual(want);
    expect(p).toEqual(['0', [...keys].sort()]);
  });

  test('MATCH and TYPE: the one matching key is found on the first call, whichever master holds it', async () => {
    for (const node of h.cluster().masters) {
      expect(await c.call('FLUSHALL')).toBe('OK');
      expect(await r.call('FLUSHALL')).toBe('OK');
      const [set] = await keysOn(node, 'a', 1);
      for (const cl of [c, r]) {
        await cl.call('SADD', set, 'm');
        // Keys that fail MATCH or TYPE, on every master.
        for (const { key } of await keyPerMaster(h.cluster(), 'b')) await cl.call('SADD', key, 'm');
        for (const { key } of await keyPerMaster(h.cluster(), 'a:str')) await cl.call('SET', key, 'v');
      }
      const args = ['0', 'MATCH', 'a*', 'TYPE', 'set'];
      const [p, want] = [await scanOnce(c, args), await scanOnce(r, args)];
      expect([node.port, p]).toEqual([node.port, want]);
      expect(p).toEqual(['0', [set]]);
    }
  });

  test('a large keyspace is walked completely in several calls: every key once', async () => {
    const keys = Array.from({ length: 3000 }, (_, i) => `big:${i}`);
    const pipe = c.pipeline();
    for (const k of keys) pipe.call('SET', k, 'v');
    await pipe.exec();
    for (const count of [[], ['COUNT', '7'], ['COUNT', '100']]) {
      const seen: string[] = [];
      let cursor = '0';
      let calls = 0;
      do {
        const [next, batch] = (await c.call('SCAN', cursor, ...count)) as [string, string[]];
        seen.push(...batch);
        cursor = next;
        calls++;
      } while (cursor !== '0' && calls < 10_000);
      expect([count, cursor, seen.length, new Set(seen).size]).toEqual([count, '0', keys.length, keys.length]);
      expect([...seen].sort()).toEqual([...keys].sort());
      // Each master does at most COUNT's work per call: a keyspace larger than COUNT takes several calls.
      expect(calls).toBeGreaterThan(3);
    }
  });

  test('errors are the node\'s, as one Redis gives them', async () => {
    for (const args of [
      ['SCAN', '0', 'COUNT', '0'],
      ['SCAN', '0', 'COUNT', 'x'],
      ['SCAN', '0', 'MATCH'],
      ['SCAN', 'x'],
    ]) {
      const [p, want] = await both(c, r, args);
      expect([args, p]).toEqual([args, want]);
    }
  });
});

// ---------------------------------------------------------------------------
describe('SCRIPT EXISTS, SCRIPT KILL, FUNCTION KILL', () => {
  const SPIN = 'local i = 0 while true do i = i + 1 end';
  const SPIN_LIB = "#!lua name=spinlib\nredis.register_function('spin', function() local i = 0 while true do i = i + 1 end end)";
  beforeAll(async () => {
    expect(await c.call('CONFIG', 'SET', 'lua-time-limit', '50')).toBe('OK');
    expect(await r.call('CONFIG', 'SET', 'lua-time-limit', '50')).toBe('OK');
  });
  afterAll(async () => {
    await c.call('CONFIG', 'SET', 'lua-time-limit', '5000');
    await c.call('FUNCTION', 'FLUSH');
  });


  test('1 for a script run by EVAL on one master, as on one Redis', async () => {
    const value = `exists-${Date.now()}`;
    const body = `return '${value}'`;
    const sha = sha1(body);
    expect(await both(c, r, ['EVAL', body, 0])).toEqual([value, value]);
    const holders = await Promise.all(h.cluster().masters.map((m) => m.command('SCRIPT', 'EXISTS', sha)));
    expect(holders.filter((x) => (x as number[])[0] === 1).length).toBe(1);
    expect(await both(c, r, ['SCRIPT', 'EXISTS', sha, sha1('never seen')])).toEqual([
      [1, 0],
      [1, 0],
    ]);
  });

  test('0 for an EVAL that does not compile, as on one Redis', async () => {
    const body = `return 1 + -- ${Date.now()}`;
    const [p, want] = await both(c, r, ['EVAL', body, 0]);
    expect(p).toEqual(want);
    expect(await both(c, r, ['SCRIPT', 'EXISTS', sha1(body)])).toEqual([[0], [0]]);
  });

  test('a script the proxy never saw: 1 only when every master has it', async () => {
    const body = `return 'direct-${Date.now()}'`;
    const sha = sha1(body);
    const [m0, ...rest] = h.cluster().masters;
    await m0.command('SCRIPT', 'LOAD', body);
    expect(await c.call('SCRIPT', 'EXISTS', sha)).toEqual([0]);
    for (const m of rest) await m.command('SCRIPT', 'LOAD', body);
    expect(await c.call('SCRIPT', 'EXISTS', sha)).toEqual([1]);
  });

  test('SCRIPT KILL and FUNCTION KILL with nothing running: NOTBUSY, as one Redis', async () => {
    expect(await both(c, r, ['SCRIPT', 'KILL'])).toEqual([
      { err: 'NOTBUSY No scripts in execution right now.' },
      { err: 'NOTBUSY No scripts in execution right now.' },
    ]);
    expect(await both(c, r, ['FUNCTION', 'KILL'])).toEqual([
      { err: 'NOTBUSY No scripts in execution right now.' },
      { err: 'NOTBUSY No scripts in execution right now.' },
    ]);
  });

  /** Resolves once `node` answers BUSY (its script runs past lua-time-limit). */
  async function busy(node: RedisNode): Promise<void> {
    await waitFor(`${node.address} to be busy`, async () => {
      try {
        await node.command('PING');
        return false;
      } catch (err) {
        return (err as Error).message.startsWith('BUSY');
      }
    }, 10_000);
  }

  /**
   * A busy script started by one client, killed by another; returns the killer's reply and the
   * busy client's error. `kill` may first try the wrong KILL, whose error is returned too.
   */
  async function killBusy(
    run: (cl: Redis) => Promise<unknown>,
    busyNode: RedisNode,
    runner: Redis,
    killer: Redis,
    kills: string[][],
  ): Promise<[Outcome[], Outcome]> {
    // Both connected first: ioredis's ready check (INFO) would meet the busy node.
    await Promise.all([runner.ping(), killer.ping()]);
    const running = outcome(run(runner));
    await busy(busyNode);
    const replies: Outcome[] = [];
    for (const k of kills) replies.push(await outcome(killer.call(k[0], ...k.slice(1))));
    return [replies, await running];
  }

  test('SCRIPT KILL from another client kills a busy script on one master; the EVAL gets Redis\'s error', async () => {
    const [{ key, node }] = await keyPerMaster(h.cluster(), 'spin');
    const kill = [['SCRIPT', 'KILL']];
    const viaProxy = await killBusy((cl) => cl.call('EVAL', SPIN, 1, key), node, h.connect(), h.connect(), kill);
    const onOne = await killBusy((cl) => cl.call('EVAL', SPIN, 1, key), refNode(), refConnect(), refConnect(), kill);
    expect(viaProxy).toEqual(onOne);
    expect(viaProxy).toEqual([['OK'], { err: expect.stringMatching(/^ERR Script killed by user with SCRIPT KILL\.\.\. script: [0-9a-f]{40}, on @user_script:1\.$/) }]);
    // The lane the EVAL held works again.
    expect(await c.call('SET', key, 'after')).toBe('OK');
    expect(await c.call('SCRIPT', 'KILL').catch((e: Error) => e.message)).toBe('NOTBUSY No scripts in execution right now.');
  });

  test('a busy script holds no other client of its lane: they get the node\'s BUSY at once, fan-outs too, and their replies after the kill', async () => {
    const keys = await keyPerMaster(h.cluster(), 'lane');
    const [{ key, node }, other] = keys;
    // Every client below shares one back-end connection per node (connectionsPerNode: 1).
    const [runner, waiter, late, killer] = [h.connect(), h.connect(), h.connect(), h.connect()];
    await Promise.all([runner, waiter, late, killer].map((x) => x.ping()));
    const w = `{${key}}:w`; // on the busy master, beside `key`
    await c.call('SET', w, 'written-behind');
    const running = outcome(runner.call('EVAL', SPIN, 1, key));
    // Written right behind the script, before the node turns busy: it waits for the script's end.
    const written = waiter.get(w);
    await busy(node);
    // From now on the lane takes nothing new: another connection gets the node's answer at once.
    const started = performance.now();
    const busyReply = await outcome(late.get(w));
    const fanout = await outcome(late.call('DBSIZE'));
    const elapsed = performance.now() - started;
    expect(busyReply).toEqual({ err: busyText('SCRIPT') });
    expect(fanout).toEqual({ err: busyText('SCRIPT') });
    // Other masters are not busy: their keys answer as usual.
    expect(await late.set(other.key, 'v')).toBe('OK');
    expect(elapsed).toBeLessThan(2000);
    expect(await killer.call('SCRIPT', 'KILL')).toBe('OK');
    expect(await running).toEqual({ err: expect.stringMatching(/^ERR Script killed by user with SCRIPT KILL/) });
    // The request written behind the script got its reply once the script ended, not an error.
    expect(await written).toBe('written-behind');
    expect(await late.get(w)).toBe('written-behind');
  });

  test('FUNCTION KILL kills a busy function; SCRIPT KILL meanwhile gets Redis\'s BUSY refusal', async () => {
    expect(await both(c, r, ['FUNCTION', 'LOAD', 'REPLACE', SPIN_LIB])).toEqual(['spinlib', 'spinlib']);
    const [, { key, node }] = await keyPerMaster(h.cluster(), 'fspin');
    const kills = [['SCRIPT', 'KILL'], ['FUNCTION', 'KILL']];
    const viaProxy = await killBusy((cl) => cl.call('FCALL', 'spin', 1, key), node, h.connect(), h.connect(), kills);
    const onOne = await killBusy((cl) => cl.call('FCALL', 'spin', 1, key), refNode(), refConnect(), refConnect(), kills);
    expect(viaProxy).toEqual(onOne);
    expect(viaProxy[0]).toEqual([{ err: busyText('FUNCTION') }, 'OK']);
    expect(await c.call('GET', key)).toBeNull();
  });
});

// ---------------------------------------------------------------------------
describe('INFO', () => {
  async function info(cl: Redis, ...sections: string[]): Promise<string> {
    return String(await cl.call('INFO', ...sections));
  }

  test('the sections are those one Redis sends, then # Proxy', async () => {
    for (const args of [[], ['default'], ['all'], ['everything'], ['clients', 'stats'], ['commandstats']]) {
      const withProxy = args.length === 0 || ['default', 'all', 'everything'].includes(args[0]);
      expect([args, headers(await info(c, ...args))]).toEqual([args, [...headers(await info(r, ...args)), ...(withProxy ? ['# Proxy'] : [])]]);
    }
    expect(await both(c, r, ['INFO', 'no-such-section'])).toEqual(['', '']);
    expect(fieldsOf(await info(c, 'stats'), 'Stats')).toEqual(fieldsOf(await info(r, 'stats'), 'Stats'));
  });

  test('every field named once: # Proxy uses no name one Redis\'s INFO uses, so a map of INFO holds Redis\'s meaning', async () => {
    const names = (text: string): string[] => text.split('\r\n').filter((l) => l !== '' && !l.startsWith('#')).map((l) => l.slice(0, l.indexOf(':')));
    const redisNames = new Set(names(await info(r, 'everything')));
    const proxyNames = fieldsOf(await info(c, 'proxy'), 'Proxy');
    expect(proxyNames.length).toBeGreaterThan(30);
    expect(proxyNames.filter((n) => redisNames.has(n))).toEqual([]);
    for (const args of [[], ['all'], ['everything']]) {
      const all = names(await info(c, ...args));
      expect([args, all.filter((n, i) => all.indexOf(n) !== i)]).toEqual([args, []]);
    }
    // The proxy's own counts are there under their own names, beside Redis's.
    const text = await info(c);
    for (const name of ['process_id', 'uptime_in_seconds', 'connected_clients', 'total_connections_received', 'rejected_connections', 'total_commands_processed', 'used_memory_rss', 'tracking_clients', 'tracking_total_keys']) {
      expect([name, infoField(text, name) !== undefined, infoField(text, `proxy_${name}`) !== undefined]).toEqual([name, true, true]);
    }
    expect(infoField(text, 'proxy_process_id')).not.toBe(infoField(text, 'process_id'));
  });

  test('# Clients: the proxy\'s clients, in Redis\'s field order', async () => {
    const fields = fieldsOf(await info(c, 'clients'), 'Clients');
    const redisFields = fieldsOf(await info(r, 'clients'), 'Clients');
    expect(fields).toEqual(redisFields.filter((f) => fields.includes(f)));
    // The proxy's own five, and the fields a newer back end has (Redis 7.2+, Valkey) when it has them.
    const newer = ['pubsub_clients', 'watching_clients', 'clients_in_timeout_table', 'total_watched_keys', 'total_blocking_keys', 'total_blocking_keys_on_nokey'];
    expect(fields).toEqual(['connected_clients', 'cluster_connections', 'maxclients', 'blocked_clients', 'tracking_clients', ...newer.filter((f) => redisFields.includes(f))]);
    const before = Number(infoField(await info(c, 'clients'), 'connected_clients'));
    const extra = [h.connect(), h.connect(), h.connect()];
    await Promise.all(extra.map((e) => e.ping()));
    expect(Number(infoField(await info(c, 'clients'), 'connected_clients'))).toBe(before + 3);
    for (const e of extra) e.disconnect();
    await waitFor('the 3 clients to be gone', async () => Number(infoField(await info(c, 'clients'), 'connected_clients')) === before);
    expect(infoField(await info(c, 'clients'), 'maxclients')).toBe('10000');
  });

  // total_blocking_keys (and _on_nokey, pubsub_clients) are Redis 7.2's: a 7.0 node has none to sum.
  if (redisAtLeast(7, 2)) {
    test('# Clients: blocked keys and subscribers counted as one server, the keys summed over the masters (Redis 7.2+)', async () => {
      const keys = (await keyPerMaster(h.cluster(), 'tbk')).slice(0, 2).map((k) => k.key);
      const field = async (name: string): Promise<number> => Number(infoField(await info(c, 'clients'), name));
      const before = { keys: await field('total_blocking_keys'), nokey: await field('total_blocking_keys_on_nokey'), pubsub: await field('pubsub_clients') };
      await c.xgroup('CREATE', keys[1], 'g', '$', 'MKSTREAM');
      const blockers = [h.connect(), h.connect()];
      const subscriber = h.connect();
      const blocked = [blockers[0].blpop(keys[0], 0), blockers[1].call('XREADGROUP', 'GROUP', 'g', 'x', 'BLOCK', '0', 'STREAMS', keys[1], '>')];
      await subscriber.subscribe('tbk:channel');
      await waitFor('both clients blocked', async () => (await field('blocked_clients')) >= 2);
      expect(await field('total_blocking_keys')).toBe(before.keys + 2);
      // XREADGROUP's key is one a deletion wakes: it also counts on_nokey.
      expect(await field('total_blocking_keys_on_nokey')).toBe(before.nokey + 1);
      expect(await field('pubsub_clients')).toBe(before.pubsub + 1);
      await c.rpush(keys[0], 'v');
      await c.xadd(keys[1], '*', 'f', 'v');
      await Promise.all(blocked);
      await waitFor('the keys released', async () => (await field('total_blocking_keys')) === before.keys);
      await c.del(keys[1]);
      subscriber.disconnect();
    });
  }

  test('blocked_clients counts clients once their node blocked them; order kept for the waiters', async () => {
    const [, { key }] = await keyPerMaster(h.cluster(), 'blk');
    const blocked = async (): Promise<number> => Number(infoField(await info(c, 'clients'), 'blocked_clients'));
    expect(await blocked()).toBe(0);
    const w1 = h.connect();
    const w2 = h.connect();
    const first = w1.blpop(key, 10);
    await waitFor('one blocked client', async () => (await blocked()) === 1, 10_000);
    const second = w2.blpop(key, 10);
    await waitFor('two blocked clients', async () => (await blocked()) === 2, 10_000);
    expect(await c.call('RPUSH', key, 'a', 'b')).toBe(2);
    expect(await first).toEqual([key, 'a']);
    expect(await second).toEqual([key, 'b']);
    await waitFor('no blocked client', async () => (await blocked()) === 0, 10_000);
    // WAIT blocks on every master; the client is counted once.
    const waiting = h.connect().call('WAIT', '5', '2000');
    await waitFor('WAIT to block', async () => (await blocked()) === 1, 2_000);
    expect(await waiting).toBe(1);
    expect(await blocked()).toBe(0);
  });

  test('# Stats, # Commandstats, # Errorstats and # Keyspace are summed over the masters', async () => {
    const keys = (await keyPerMaster(h.cluster(), 'sum')).map((k) => k.key);
    for (const cl of [c, r]) {
      expect(await cl.call('FLUSHALL')).toBe('OK');
      expect(await cl.call('CONFIG', 'RESETSTAT')).toBe('OK');
      for (const key of keys) {
        await cl.call('SET', key, 'v', 'EX', '1000');
        await cl.call('GET', key);
        await cl.call('GET', `${key}:missing`);
        await cl.call('GET', `${key}:missing`);
        await cl.call('LPUSH', key, 'x').catch(() => undefined);
      }
      await cl.call('SET', 'plain', 'v');
    }
    const [stats, refStats] = [await info(c, 'stats'), await info(r, 'stats')];
    for (const f of ['keyspace_hits', 'keyspace_misses', 'total_error_replies', 'expired_keys', 'evicted_keys']) {
      expect([f, infoField(stats, f)]).toEqual([f, infoField(refStats, f)]);
    }
    expect(infoField(stats, 'keyspace_misses')).toBe('6');
    expect(infoField(stats, 'expired_stale_perc')).toMatch(/^\d+\.\d\d$/);
    expect(infoField(stats, 'instantaneous_input_kbps')).toMatch(/^\d+\.\d\d$/);
    const direct = await Promise.all(h.cluster().masters.map((m) => m.info('stats')));
    expect(infoField(stats, 'keyspace_misses')).toBe(String(direct.reduce((n, d) => n + Number(d.get('keyspace_misses')), 0)));

    const cmd = (await info(c, 'commandstats')).replace(/\r/g, '');
    const refCmd = (await info(r, 'commandstats')).replace(/\r/g, '');
    const calls = (text: string, name: string): string | undefined => new RegExp(`^cmdstat_${name}:calls=(\\d+),usec=\\d+,usec_per_call=\\d+\\.\\d\\d,rejected_calls=(\\d+),failed_calls=(\\d+)$`, 'm').exec(text)?.slice(1).join('/');
    for (const name of ['get', 'set', 'lpush']) expect([name, calls(cmd, name)]).toEqual([name, calls(refCmd, name)]);
    expect(calls(cmd, 'get')).toBe('9/0/0');
    const get = /^cmdstat_get:calls=(\d+),usec=(\d+),usec_per_call=(\d+\.\d\d)/m.exec(cmd);
    expect(get?.[3]).toBe((Number(get?.[2]) / Number(get?.[1])).toFixed(2));
    expect(await both(c, r, ['INFO', 'errorstats'])).toEqual(['# Errorstats\r\nerrorstat_WRONGTYPE:count=3\r\n', '# Errorstats\r\nerrorstat_WRONGTYPE:count=3\r\n']);
    // Redis 7.4 adds subexpiry (keys with expiring hash fields); Valkey 8 does not.
    const keyspace = SERVER.flavor === 'redis' && redisAtLeast(7, 4) ? /^# Keyspace\r\ndb0:keys=(\d+),expires=(\d+),avg_ttl=\d+,subexpiry=\d+\r\n$/ : /^# Keyspace\r\ndb0:keys=(\d+),expires=(\d+),avg_ttl=\d+\r\n$/;
    const [p, want] = (await both(c, r, ['INFO', 'keyspace'])) as [string, string];
    expect(keyspace.exec(p)?.slice(1, 3)).toEqual(['4', '3']);
    expect(keyspace.exec(want)?.slice(1, 3)).toEqual(['4', '3']);
  });

  test('# Memory and # Persistence are the cluster\'s: byte counts and pending changes summed', async () => {
    // A megabyte on each master, so each one's dataset is mostly this and alike whatever earlier
    // tests left on one master (their few hundred KB made one master's figure half of the sum).
    for (const { key } of await keyPerMaster(h.cluster(), 'mem')) await c.call('SET', key, 'x'.repeat(1_000_000));
    const masters = h.cluster().masters;
    const direct = async (section: string, field: string): Promise<number> =>
      (await Promise.all(masters.map(async (m) => Number((await m.info(section)).get(field))))).reduce((a, b) => a + b, 0);
    // Nothing writes between the two reads: the sum is exact.
    expect(Number(infoField(await info(c, 'persistence'), 'rdb_changes_since_last_save'))).toBe(await direct('persistence', 'rdb_changes_since_last_save'));
    expect(infoField(await info(c, 'persistence'), 'rdb_bgsave_in_progress')).toBe('0');
    // Memory moves with every reply buffer: close to the sum read just before and after, and well
    // above any one master's (a single master's figure would be about a third of it).
    const before = await direct('memory', 'used_memory_dataset');
    const memory = await info(c, 'memory');
    const after = await direct('memory', 'used_memory_dataset');
    const dataset = Number(infoField(memory, 'used_memory_dataset'));
    expect(dataset).toBeGreaterThanOrEqual(Math.min(before, after) * 0.8);
    expect(dataset).toBeLessThanOrEqual(Math.max(before, after) * 1.2);
    const eachDataset = await Promise.all(masters.map(async (m) => Number((await m.info('memory')).get('used_memory_dataset'))));
    expect(dataset).toBeGreaterThan(2 * Math.max(...eachDataset));
    const used = Number(infoField(memory, 'used_memory'));
    expect(used).toBeGreaterThan(Math.max(...(await Promise.all(masters.map(async (m) => Number((await m.info('memory')).get('used_memory')))))));
    expect(infoField(memory, 'used_memory_human')).toBe(`${(used / 1024 / 1024).toFixed(2)}M`);
    // A node's setting is one node's: the first master's.
    expect(infoField(memory, 'maxmemory_policy')).toBe((await masters[0].info('memory')).get('maxmemory_policy'));
    // The same fields, in the same order, as one Redis's.
    expect(fieldsOf(memory, 'Memory')).toEqual(fieldsOf(await info(r, 'memory'), 'Memory'));
  });

  test('INFO proxy alone needs no node; redis-cli INFO clients works', async () => {
    const lines = (await info(c, 'proxy')).split('\r\n');
    expect(lines[0]).toBe('# Proxy');
    const out = await runRedisCli(['-p', String(h.proxy().address.port), 'INFO', 'clients']);
    expect(out.split('\n')[0].trim()).toBe('# Clients');
    expect(out).toMatch(/connected_clients:\d+/);
  });
});

// ---------------------------------------------------------------------------
describe('ring mode: every ring node', () => {
  const ring = useRingProxy(2);

  test('CONFIG SET reaches both nodes; RANDOMKEY and SCRIPT EXISTS cover the ring', async () => {
    const rc = ring.connect();
    expect(await rc.call('CONFIG', 'SET', 'lua-time-limit', '777')).toBe('OK');
    for (const n of ring.backend().nodes) expect(await n.command('CONFIG', 'GET', 'lua-time-limit')).toEqual(['lua-time-limit', '777']);
    expect(await rc.call('CONFIG', 'RESETSTAT')).toBe('OK');
    expect(await rc.call('RANDOMKEY')).toBeNull();
    await rc.call('SET', 'ring-key', 'v');
    expect(await rc.call('RANDOMKEY')).toBe('ring-key');
    const body = "return 'ring'";
    expect(await rc.call('EVAL', body, 0)).toBe('ring');
    expect(await rc.call('SCRIPT', 'EXISTS', sha1(body))).toEqual([1]);
    expect(infoField(String(await rc.call('INFO', 'clients')), 'connected_clients')).toBe('1');
  });
});
