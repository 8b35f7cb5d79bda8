// MULTI/EXEC/DISCARD/WATCH/UNWATCH through the proxy (SPEC section 5): one slot per transaction
// (keys of two slots: QUEUED, then CROSSSLOT at EXEC, as a Redis Cluster node answers), Redis's
// errors and EXECABORT, WATCH on a connection pinned only for the transaction, EVALSHA in MULTI
// never NOSCRIPT.

import net from 'node:net';
import { createHash } from 'node:crypto';
import { useProxy, client } from '../helpers/proxy';
import { keyPerMaster, waitFor } from '../helpers/master-keys';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { keySlot } from '../../sharding/slot';
import { SERVER } from '../helpers/server-version';

const { cluster, proxy, connect } = useProxy();

/** Sends raw RESP commands on one socket and resolves the raw reply bytes once `replies` lines-ish are in. */
function rawExchange(port: number, commands: string[][], done: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no complete reply; got ${JSON.stringify(text)}`));
    }, 5000);
    s.on('data', (d) => {
      text += d.toString();
      if (done(text)) {
        clearTimeout(timer);
        s.destroy();
        resolve(text);
      }
    });
    s.on('error', reject);
    s.write(commands.map((c) => `*${c.length}\r\n${c.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`).join(''));
  });
}

async function clientCount(node: RedisNode, match: string): Promise<number> {
  const list = (await node.command('CLIENT', 'LIST')) as string;
  return list.split('\n').filter((l) => l.includes(match)).length;
}

test('MULTI/EXEC on one slot runs atomically on the owner of each master', async () => {
  const c = connect();
  for (const { key, node } of await keyPerMaster(cluster(), 'tx')) {
    const res = await c.multi().set(`{${key}}a`, '1').incr(`{${key}}a`).get(`{${key}}a`).exec();
    expect(res).toEqual([[null, 'OK'], [null, 2], [null, '2']]);
    expect(await node.command('GET', `{${key}}a`)).toBe('2');
  }
});

// Valkey 8 refuses MULTI and WATCH inside MULTI as any command flagged no-multi, in its own words.
const VALKEY_8 = SERVER.flavor === 'valkey' && SERVER.major >= 8;
const NESTED_MULTI = VALKEY_8 ? '-ERR Command not allowed inside a transaction' : '-ERR MULTI calls can not be nested';
const NESTED_WATCH = VALKEY_8 ? '-ERR Command not allowed inside a transaction' : '-ERR WATCH inside MULTI is not allowed';

test('Redis replies verbatim: QUEUED, nesting, EXEC/DISCARD without MULTI, WATCH inside MULTI, EXECABORT', async () => {
  const port = proxy().address.port;
  const text = await rawExchange(
    port,
    [
      ['MULTI'], ['MULTI'], ['WATCH', 'x'], ['SET', '{t}a', '1'], ['GET', '{t}a', 'extra'], ['EXEC'],
      ['EXEC'], ['DISCARD'],
      ['MULTI'], ['SET', '{t}a', '2'], ['DISCARD'], ['GET', '{t}a'],
      ['MULTI'], ['NOSUCHCOMMAND'], ['EXEC'],
    ],
    (t) => (t.match(/EXECABORT/g) ?? []).length === 2,
  );
  expect(text).toBe(
    [
      '+OK', NESTED_MULTI, NESTED_WATCH, '+QUEUED',
      "-ERR wrong number of arguments for 'get' command", '-EXECABORT Transaction discarded because of previous errors.',
      '-ERR EXEC without MULTI', '-ERR DISCARD without MULTI',
      '+OK', '+QUEUED', '+OK', '$-1',
      '+OK', "-ERR unknown command 'NOSUCHCOMMAND', with args beginning with: ", '-EXECABORT Transaction discarded because of previous errors.',
      '',
    ].join('\r\n'),
  );
});

test('MULTI or WATCH inside MULTI: the transaction runs on Redis; on Valkey 8 its EXEC answers EXECABORT, as the node does', async () => {
  const exec = VALKEY_8 ? ['-EXECABORT Transaction discarded because of previous errors.', '$-1'] : ['*1', '+OK', '$1', '1'];
  const expected = ['+OK', NESTED_MULTI, NESTED_WATCH, '+QUEUED', ...exec, ''].join('\r\n');
  const commands = [['MULTI'], ['MULTI'], ['WATCH', 'x'], ['SET', '{t}n', '1'], ['EXEC'], ['GET', '{t}n']];
  const text = await rawExchange(proxy().address.port, commands, (t) => t.length >= expected.length);
  expect(text).toBe(expected);
  await connect().del('{t}n');
});

const slotOf = (key: string): number => keySlot(Buffer.from(key));

/** MULTI, a SET of each key, EXEC, then a GET of each: the raw replies, once all 6 are in. */
function crossSlotTransaction(port: number, a: string, b: string): Promise<string> {
  const commands = [['MULTI'], ['SET', a, '1'], ['SET', b, '2'], ['EXEC'], ['GET', a], ['GET', b]];
  return rawExchange(port, commands, (t) => t.split('\r\n').length > commands.length);
}

const CROSSSLOT_AT_EXEC = "+OK\r\n+QUEUED\r\n+QUEUED\r\n-CROSSSLOT Keys in request don't hash to the same slot\r\n$-1\r\n$-1\r\n";

test("keys of two slots inside MULTI: each QUEUED, EXEC refused with CROSSSLOT, nothing run: a cluster node owning both slots answers these bytes", async () => {
  // Two slots of one master, asked of that master directly and of the proxy.
  const [{ key: a, node }] = await keyPerMaster(cluster(), 'txcross-a');
  const [{ key: b }] = await keyPerMaster(cluster(), 'txcross-b');
  expect(slotOf(a)).not.toBe(slotOf(b));
  expect(await crossSlotTransaction(node.port, a, b)).toBe(CROSSSLOT_AT_EXEC);
  expect(await crossSlotTransaction(proxy().address.port, a, b)).toBe(CROSSSLOT_AT_EXEC);
  // Dirty too (a wrong arity queued): EXECABORT, from both.
  const dirty = [['MULTI'], ['SET', a, '1'], ['GET'], ['SET', b, '2'], ['EXEC']];
  const [fromNode, fromProxy] = await Promise.all([node.port, proxy().address.port].map((port) => rawExchange(port, dirty, (t) => t.split('\r\n').length > dirty.length)));
  expect(fromProxy).toBe(fromNode);
  expect(fromNode).toMatch(/-EXECABORT Transaction discarded because of previous errors\.\r\n$/);
  // A client library sees EXEC's error.
  const c = connect();
  await expect(c.multi().set(a, '1').set(b, '2').exec()).rejects.toThrow("CROSSSLOT Keys in request don't hash to the same slot");
  expect(await c.get(a)).toBeNull();
  expect(await c.get(b)).toBeNull();
});

test('keys of two masters inside MULTI: the proxy answers as one Redis (CROSSSLOT at EXEC); a node of the cluster answers MOVED at queue time', async () => {
  const [a, b] = await keyPerMaster(cluster(), 'txcross');
  expect(await crossSlotTransaction(proxy().address.port, a.key, b.key)).toBe(CROSSSLOT_AT_EXEC);
  // The node owns a's slot only: b's SET is redirected, which dirties the transaction.
  const direct = await rawExchange(a.node.port, [['MULTI'], ['SET', a.key, '1'], ['SET', b.key, '2'], ['EXEC']], (t) => t.split('\r\n').length > 4);
  expect(direct).toBe(`+OK\r\n+QUEUED\r\n-MOVED ${slotOf(b.key)} ${b.node.address}\r\n-EXECABORT Transaction discarded because of previous errors.\r\n`);
  // One command whose own keys span slots is refused when queued, as Redis does; EXEC then aborts.
  const own = await rawExchange(proxy().address.port, [['MULTI'], ['MGET', a.key, b.key], ['EXEC']], (t) => t.split('\r\n').length > 3);
  expect(own).toBe("+OK\r\n-CROSSSLOT Keys in request don't hash to the same slot\r\n-EXECABORT Transaction discarded because of previous errors.\r\n");
});

test('WATCH: EXEC returns nil when another client touched the key; the WATCH connection is closed after', async () => {
  const [{ key, node }] = await keyPerMaster(cluster(), 'watched');
  const c = connect();
  const other = connect();
  await c.set(key, '10');
  const before = await clientCount(node, 'cmd=');
  expect(await c.watch(key)).toBe('OK');
  expect(await c.get(key)).toBe('10');
  await other.set(key, '11');
  expect(await c.multi().set(key, '9').exec()).toBeNull();
  expect(await c.get(key)).toBe('11');
  // Untouched: the transaction runs.
  await c.watch(key);
  expect(await c.multi().decr(key).exec()).toEqual([[null, 10]]);
  await waitFor('the WATCH connection to close', async () => (await clientCount(node, 'cmd=')) <= before);
  // UNWATCH and DISCARD release it too.
  await c.watch(key);
  expect(await clientCount(node, 'cmd=watch')).toBe(1);
  expect(await c.unwatch()).toBe('OK');
  await waitFor('UNWATCH to release the connection', async () => (await clientCount(node, 'cmd=watch')) + (await clientCount(node, 'cmd=unwatch')) === 0);
  await c.watch(key);
  expect(await c.call('MULTI')).toBe('OK');
  expect(await c.call('DISCARD')).toBe('OK');
  await waitFor('DISCARD to release the connection', async () => (await clientCount(node, 'cmd=watch')) === 0);
});

test('WATCH keys of two slots: CROSSSLOT', async () => {
  const c = connect();
  const [a, b] = await keyPerMaster(cluster(), 'watchcross');
  await expect(c.watch(a.key, b.key)).rejects.toThrow("CROSSSLOT Keys in request don't hash to the same slot");
  await c.watch(a.key);
  await expect(c.watch(b.key)).rejects.toThrow("CROSSSLOT Keys in request don't hash to the same slot");
  await c.unwatch();
});

test('a client that disconnects inside WATCH releases its back-end connection', async () => {
  const [{ key, node }] = await keyPerMaster(cluster(), 'gone');
  const c = client(proxy()); // not from connect(): this test disconnects it itself
  await c.watch(key);
  expect(await clientCount(node, 'cmd=watch')).toBe(1);
  c.disconnect();
  await waitFor('the node to drop the WATCH connection', async () => (await clientCount(node, 'cmd=watch')) === 0);
});

test('EVALSHA inside MULTI after the node lost its scripts: no NOSCRIPT in the EXEC reply', async () => {
  const c = connect();
  const body = "return redis.call('INCR', KEYS[1]) -- in multi";
  const sha = createHash('sha1').update(body).digest('hex');
  expect(await c.script('LOAD', body)).toBe(sha);
  for (const { key, node } of await keyPerMaster(cluster(), 'txsha')) {
    await node.command('SCRIPT', 'FLUSH');
    const res = await c.multi().evalsha(sha, 1, key).evalsha(sha, 1, key).exec();
    expect(res).toEqual([[null, 1], [null, 2]]);
  }
});

test('keyless commands and PING inside MULTI run on the node', async () => {
  const c = connect();
  expect(await c.multi().ping().echo('hi').set('{p}k', 'v').publish('nobody', 'm').exec()).toEqual([[null, 'PONG'], [null, 'hi'], [null, 'OK'], [null, 0]]);
});

test('commands that reach every master run inside MULTI, each answered in EXEC as outside a transaction', async () => {
  const c = connect();
  await c.flushall();
  const keys = await keyPerMaster(cluster(), 'spread');
  for (const { key } of keys) await c.set(key, 'v');
  const body = "return 'spread'";
  const sha = createHash('sha1').update(body).digest('hex');
  const [tagged] = keys;
  const reply = await c
    .multi()
    .dbsize()
    .set(tagged.key, 'w')
    .keys('spread*')
    .call('CONFIG', 'SET', 'lua-time-limit', '4321')
    .call('CONFIG', 'GET', 'lua-time-limit')
    .call('SCRIPT', 'LOAD', body)
    .randomkey()
    .call('INFO', 'keyspace')
    .exec();
  expect(reply?.[0]).toEqual([null, keys.length]);
  expect(reply?.[1]).toEqual([null, 'OK']);
  expect((reply?.[2][1] as string[]).sort()).toEqual(keys.map((k) => k.key).sort());
  expect(reply?.slice(3, 6)).toEqual([[null, 'OK'], [null, ['lua-time-limit', '4321']], [null, sha]]);
  expect(keys.map((k) => k.key)).toContain(reply?.[6][1]);
  expect(String(reply?.[7][1])).toContain(`db0:keys=${keys.length},`);
  // Every node got them: the setting, the script.
  for (const n of cluster().nodes) expect(await n.command('CONFIG', 'GET', 'lua-time-limit')).toEqual(['lua-time-limit', '4321']);
  for (const m of cluster().masters) expect(await m.command('SCRIPT', 'EXISTS', sha)).toEqual([1]);
  // FLUSHALL in a transaction empties every master; EXEC says OK once.
  expect(await c.multi().set(tagged.key, 'x').flushall().dbsize().exec()).toEqual([[null, 'OK'], [null, 'OK'], [null, 0]]);
  expect(await c.dbsize()).toBe(0);
});

test('WATCH then FLUSHALL from the same client makes EXEC return nil, as on one Redis', async () => {
  const c = connect();
  const [{ key }] = await keyPerMaster(cluster(), 'wflush');
  await c.set(key, '1');
  await c.watch(key);
  expect(await c.flushall()).toBe('OK');
  expect(await c.multi().set(key, '2').exec()).toBeNull();
  expect(await c.get(key)).toBeNull();
});

test('RESET inside MULTI runs at once and drops the transaction and its WATCH', async () => {
  const [{ key, node }] = await keyPerMaster(cluster(), 'reset');
  const c = connect();
  await c.watch(key);
  expect(await c.call('MULTI')).toBe('OK');
  expect(await c.call('SET', key, 'queued')).toBe('QUEUED');
  expect(await c.call('RESET')).toBe('RESET');
  await expect(c.call('EXEC')).rejects.toThrow('ERR EXEC without MULTI');
  expect(await c.get(key)).toBeNull();
  await waitFor('RESET to release the WATCH connection', async () => (await clientCount(node, 'cmd=watch')) + (await clientCount(node, 'cmd=multi')) === 0);
});
