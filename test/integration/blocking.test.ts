// Blocking commands and WAIT through the proxy (SPEC section 5): each on a connection of its own,
// released when the client goes; blocked clients do not slow anyone else.

import Redis from 'ioredis';
import { useProxy, client } from '../helpers/proxy';
import { keyPerMaster, waitFor } from '../helpers/master-keys';
import { RedisNode } from '../../cmd/sandbox/redis-node';

// A retry window longer than a failover (node timeout 2 s + election), for the kill test at the end.
const { cluster, proxy, connect } = useProxy({ cluster: { retryWindowMs: 15_000 } });

async function blockedOn(node: RedisNode, cmd: string): Promise<number> {
  const list = (await node.command('CLIENT', 'LIST')) as string;
  return list.split('\n').filter((l) => l.includes(`cmd=${cmd}`) && l.includes('flags=b')).length;
}

type Case = [string, (c: Redis, k: string) => Promise<unknown>, (c: Redis, k: string) => Promise<unknown>, unknown];

const CASES: Case[] = [
  ['blpop', (c, k) => c.blpop(k, 5), (c, k) => c.rpush(k, 'a'), ['K', 'a']],
  ['brpop', (c, k) => c.brpop(k, 5), (c, k) => c.rpush(k, 'b'), ['K', 'b']],
  ['blmove', (c, k) => c.blmove(k, `{${k}}dst`, 'LEFT', 'RIGHT', 5), (c, k) => c.rpush(k, 'c'), 'c'],
  ['brpoplpush', (c, k) => c.brpoplpush(k, `{${k}}dst`, 5), (c, k) => c.rpush(k, 'd'), 'd'],
  ['bzpopmin', (c, k) => c.bzpopmin(k, 5), (c, k) => c.zadd(k, 1, 'm'), ['K', 'm', '1']],
  ['bzpopmax', (c, k) => c.bzpopmax(k, 5), (c, k) => c.zadd(k, 2, 'n'), ['K', 'n', '2']],
  ['blmpop', (c, k) => c.call('BLMPOP', '5', '1', k, 'LEFT'), (c, k) => c.rpush(k, 'e'), ['K', ['e']]],
  ['bzmpop', (c, k) => c.call('BZMPOP', '5', '1', k, 'MIN'), (c, k) => c.zadd(k, 3, 'o'), ['K', [['o', '3']]]],
  ['xread', (c, k) => c.call('XREAD', 'BLOCK', '5000', 'STREAMS', k, '$'), (c, k) => c.xadd(k, '1-1', 'f', 'v'), [['K', [['1-1', ['f', 'v']]]]]],
];

describe.each(CASES)('%s', (name, block, produce, expected) => {
  test('blocks on the key owner of each master and gets the value another client adds', async () => {
    for (const { key, node } of await keyPerMaster(cluster(), `blk-${name}`)) {
      const waiter = connect();
      const reply = block(waiter, key);
      await waitFor(`${name} to block on ${node.address}`, async () => (await blockedOn(node, name)) === 1);
      await produce(connect(), key);
      expect(await reply).toEqual(JSON.parse(JSON.stringify(expected).replace(/"K"/g, JSON.stringify(key))));
    }
  });
});

test('XREADGROUP with BLOCK', async () => {
  const [{ key, node }] = await keyPerMaster(cluster(), 'xgroup');
  const c = connect();
  await c.xgroup('CREATE', key, 'g', '$', 'MKSTREAM');
  const reply = c.call('XREADGROUP', 'GROUP', 'g', 'me', 'BLOCK', '5000', 'STREAMS', key, '>');
  await waitFor('XREADGROUP to block', async () => (await blockedOn(node, 'xreadgroup')) === 1);
  await connect().xadd(key, '5-1', 'x', 'y');
  expect(await reply).toEqual([[key, [['5-1', ['x', 'y']]]]]);
});

test('a timeout returns nil; keys of two slots get CROSSSLOT', async () => {
  const c = connect();
  expect(await c.blpop('blk-timeout', 0.1)).toBeNull();
  const [a, b] = await keyPerMaster(cluster(), 'blkcross');
  await expect(c.blpop(a.key, b.key, 1)).rejects.toThrow("CROSSSLOT Keys in request don't hash to the same slot");
});

test('commands after a blocking one wait for it, as on one server (a pipelined LPUSH does not unblock its own BLPOP)', async () => {
  const c = connect();
  const [{ key }] = await keyPerMaster(cluster(), 'selfunblock');
  const [blpop, push] = await Promise.all([c.blpop(key, 0.3), c.lpush(key, 'late')]);
  expect(blpop).toBeNull();
  expect(push).toBe(1);
});

test('a client that disconnects while blocked releases its back-end connection', async () => {
  const [{ key, node }] = await keyPerMaster(cluster(), 'blkgone');
  const c = client(proxy()); // disconnected by the test itself
  c.blpop(key, 0).catch(() => undefined);
  await waitFor('BLPOP to block on the node', async () => (await blockedOn(node, 'blpop')) === 1);
  c.disconnect();
  await waitFor('the node to drop the blocked connection', async () => (await blockedOn(node, 'blpop')) === 0);
  const list = (await node.command('CLIENT', 'LIST')) as string;
  expect(list).not.toContain('cmd=blpop');
});

test('50 blocked clients do not slow GET/SET of others', async () => {
  const keys = (await keyPerMaster(cluster(), 'load')).map((k) => k.key);
  const workers = Array.from({ length: 4 }, () => connect());
  const run = async (): Promise<number> => {
    const started = Date.now();
    await Promise.all(
      workers.map(async (w, i) => {
        for (let j = 0; j < 250; j++) {
          const key = `${keys[j % keys.length]}:${i}`;
          await w.set(key, String(j));
          expect(await w.get(key)).toBe(String(j));
        }
      }),
    );
    return Date.now() - started;
  };
  const baseline = await run();
  const blocked = Array.from({ length: 50 }, () => connect());
  const queues = await keyPerMaster(cluster(), 'fifty');
  const replies = blocked.map((b, i) => b.blpop(queues[i % queues.length].key, 30));
  await waitFor('50 clients blocked', async () => {
    const counts = await Promise.all(cluster().masters.map((m) => blockedOn(m, 'blpop')));
    return counts.reduce((a, b) => a + b, 0) === 50;
  });
  const during = await run();
  expect(during).toBeLessThan(baseline * 3 + 250);
  const producer = connect();
  for (let i = 0; i < 50; i++) await producer.rpush(queues[i % queues.length].key, `item-${i}`);
  const got = (await Promise.all(replies)).map((r) => (r as [string, string])[1]).sort();
  expect(got).toEqual(Array.from({ length: 50 }, (_, i) => `item-${i}`).sort());
}, 60_000);

test('WAIT counts the replicas every master has in sync', async () => {
  const c = connect();
  await c.set('wait-key', 'v');
  expect(await c.call('WAIT', '1', '1000')).toBe(1);
  expect(await c.call('WAIT', '0', '0')).toBe(1);
});

test('a BLPOP sent while its master is down waits for the failover and then blocks on the new master', async () => {
  const [{ key, node: victim }] = await keyPerMaster(cluster(), 'blkfail');
  const c = connect();
  const producer = connect();
  await producer.ping(); // connected before the kill (ioredis's ready check is an INFO fan-out)
  await c.ping();
  victim.kill('SIGKILL');
  await victim.waitForExit();
  const reply = c.blpop(key, 20);
  let pushed = false;
  await waitFor('a push after the failover', async () => {
    pushed = await producer.rpush(key, 'after-failover').then(() => true, () => false);
    return pushed;
  }, 30_000);
  expect(await reply).toEqual([key, 'after-failover']);
}, 60_000);
