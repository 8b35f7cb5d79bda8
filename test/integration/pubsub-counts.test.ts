// Issue 12: through slotproxy, Pub/Sub reads as one Redis. PUBLISH counts every subscriber of every
// slotproxy once (SUBSCRIBE and PSUBSCRIBE), keyspace notifications arrive from every master, each
// once, and confirmations count as one server's. The reference is "one Redis": a single-node
// Redis Cluster owning every slot. The same client actions run against it and through two
// slotproxies in front of a 3-master cluster, and must give the same counts and the same messages.
// Then the home master fails over, and a new master joins: counts and events still come.

import Redis from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { freeClusterPorts } from '../../cmd/sandbox/ports';
import { parseClusterSlots } from '../../cmd/sandbox/cluster-slots';
import { ProxyServer } from '../../proxy/server/server';
import { client, startProxy, useProxy } from '../helpers/proxy';
import { keyPerMaster, waitFor } from '../helpers/master-keys';
import { closedAfterEach, collect, settled } from '../helpers/subscriber';
import { Side, expectOneRedis } from '../helpers/pubsub-scenario';

const PROXY_CONFIG = { cluster: { refreshIntervalMs: 500 } };
const env = useProxy(PROXY_CONFIG, { masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1000 });
let reference: RedisCluster | undefined;
let second: ProxyServer | undefined;
const track = closedAfterEach();

beforeAll(async () => {
  reference = await RedisCluster.start({ masters: 1, replicasPerMaster: 0 });
  second = await startProxy(env.cluster().seeds, PROXY_CONFIG);
  // CONFIG does not go through the proxy: set it on every node, replicas too (they may be promoted).
  for (const node of [...reference.nodes, ...env.cluster().nodes]) await node.command('CONFIG', 'SET', 'notify-keyspace-events', 'KEA');
}, 90_000);

afterAll(async () => {
  await second?.close(500);
  await reference?.stop();
}, 30_000);

const oneRedis = (): Side => ({
  connect: () => track(new Redis({ host: '127.0.0.1', port: reference!.nodes[0].port, maxRetriesPerRequest: 0 })),
});
const twoProxies = (): Side => ({
  connect: (i) => track(client(i % 2 === 0 ? env.proxy() : second!)),
});

/** "sub=N psub=M" of every client of `node` subscribed to something, sorted. */
async function subscribedLinks(node: RedisNode): Promise<string[]> {
  const lines = String(await node.command('CLIENT', 'LIST')).split('\n');
  return lines.flatMap((l) => / sub=\d+ psub=\d+ /.exec(l)?.[0].trim() ?? []).filter((l) => l !== 'sub=0 psub=0').sort();
}

test('counts, messages and keyspace events through two proxies are those of one Redis', async () => {
  const keys = (await keyPerMaster(env.cluster(), 'ks')).map((k) => k.key);
  expect(keys).toHaveLength(3);
  await expectOneRedis(oneRedis(), twoProxies(), keys);
}, 60_000);

test('a keyspace subscription is made on every master, a plain one on the home master only', async () => {
  const sub = track(client(env.proxy()));
  await sub.subscribe('plain-only');
  await sub.psubscribe('__keyevent@0__:*');
  const home = await env.cluster().masterFor(0);
  // Home: both subscriptions on one link; every other master: the keyspace pattern alone.
  const want = env.cluster().masters.map((m) => [m.port, m === home ? ['sub=1 psub=1'] : ['sub=0 psub=1']]);
  let seen: unknown[] = [];
  await waitFor('one link per master, as expected', async () => {
    seen = await Promise.all(env.cluster().masters.map(async (m) => [m.port, await subscribedLinks(m)]));
    return JSON.stringify(seen) === JSON.stringify(want);
  }, 5000).catch(() => expect(seen).toEqual(want));
});

test('a failover of the home master: the home moves, counts and every master\'s events still come, once', async () => {
  const cluster = env.cluster();
  const side = twoProxies();
  const news = track(side.connect(0));
  const all = track(side.connect(1));
  const events = track(side.connect(1));
  const gotNews = collect(news);
  const gotAll = collect(all);
  const gotEvents = collect(events);
  await news.subscribe('news');
  await all.psubscribe('*');
  await events.psubscribe('__keyevent@0__:*');
  const [pubA, pubB, writer] = [track(side.connect(0)), track(side.connect(1)), track(side.connect(0))];
  expect(await pubA.publish('news', 'before')).toBe(2);
  expect(await pubB.publish('news', 'before')).toBe(2);

  const oldHome = await cluster.masterFor(0);
  const [heir] = await cluster.replicasOf(oldHome);
  expect(await heir.cli('CLUSTER', 'FAILOVER')).toBe('OK');
  await cluster.waitForClusterOk();
  expect(await cluster.masterFor(0)).toBe(heir);
  // Both proxies move their subscribers and their PUBLISHes to the new home; the old master, a
  // replica now, keeps no subscriber link of theirs.
  let state: unknown[] = [];
  await waitFor('the subscribers and PUBLISH to move to the new home', async () => {
    state = [await subscribedLinks(heir), await subscribedLinks(oldHome), await pubA.publish('news', 'probe'), await pubB.publish('news', 'probe')];
    return JSON.stringify(state) === JSON.stringify([['sub=0 psub=1', 'sub=0 psub=1', 'sub=1 psub=0'], [], 2, 2]);
  }, 20_000).catch(() => expect(state).toEqual([['sub=0 psub=1', 'sub=0 psub=1', 'sub=1 psub=0'], [], 2, 2]));
  // Every current master's events, each once, for both keyspace subscribers.
  const keys = (await keyPerMaster(cluster, 'after-fo')).map((k) => k.key);
  const probe = (await keyPerMaster(cluster, 'probe-fo')).map((k) => k.key);
  await waitFor('events from every master', async () => {
    const before = gotEvents.length;
    for (const k of probe) await writer.set(k, 'p');
    await new Promise((r) => setTimeout(r, 100));
    return probe.every((k) => gotEvents.slice(before).includes(`__keyevent@0__:*|__keyevent@0__:set=${k}`));
  }, 20_000);
  await settled([gotNews, gotAll, gotEvents]);
  const mark = [gotNews.length, gotAll.length, gotEvents.length];
  expect(await pubA.publish('news', 'after')).toBe(2);
  for (const k of keys) await writer.set(k, 'x');
  await settled([gotNews, gotAll, gotEvents], [mark[0] + 1, mark[1] + 1 + 2 * keys.length, mark[2] + keys.length]);
  expect(gotNews.slice(mark[0])).toEqual(['news=after']);
  expect(gotAll.slice(mark[1]).sort()).toEqual(
    ['*|news=after', ...keys.flatMap((k) => [`*|__keyevent@0__:set=${k}`, `*|__keyspace@0__:${k}=set`])].sort(),
  );
  expect(gotEvents.slice(mark[2]).sort()).toEqual(keys.map((k) => `__keyevent@0__:*|__keyevent@0__:set=${k}`).sort());
}, 90_000);

test('a new master (a node joins and takes a slot over): it is subscribed too, and its events come once', async () => {
  const cluster = env.cluster();
  const [port] = await freeClusterPorts(1);
  const fresh = await RedisNode.start({ port, cluster: true, nodeTimeoutMs: 1000 });
  try {
    await fresh.command('CONFIG', 'SET', 'notify-keyspace-events', 'KEA');
    const side = twoProxies();
    const subs = [track(side.connect(0)), track(side.connect(1))];
    const got = subs.map(collect);
    for (const s of subs) await s.psubscribe('__keyspace@0__:*');
    const writer = track(side.connect(0));
    // The new node joins and takes over one empty slot of another master (not the home's).
    let tag = 0;
    while ((await cluster.masterFor(calculateSlot(`{t${tag}}`))) === (await cluster.masterFor(0))) tag++;
    const slot = calculateSlot(`{t${tag}}`);
    const donor = await cluster.masterFor(slot);
    const key = (name: string): string => `${name}{t${tag}}`;
    await fresh.command('CLUSTER', 'MEET', donor.host, donor.port);
    const freshId = String(await fresh.command('CLUSTER', 'MYID'));
    const donorId = String(await donor.command('CLUSTER', 'MYID'));
    const running = cluster.nodes.filter((n) => n.running);
    await waitFor('every node to know the new one', async () => {
      const views = await Promise.all([...running, fresh].map(async (n) => String(await n.command('CLUSTER', 'NODES'))));
      return views.every((v) => v.includes(freshId)) && views[views.length - 1].trim().split('\n').length === running.length + 1;
    });
    expect(await donor.command('CLUSTER', 'COUNTKEYSINSLOT', slot)).toBe(0);
    await fresh.command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', donorId);
    await donor.command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', freshId);
    await fresh.command('CLUSTER', 'SETSLOT', slot, 'NODE', freshId);
    await donor.command('CLUSTER', 'SETSLOT', slot, 'NODE', freshId);
    await waitFor('every node to see the new master serve the slot', async () => {
      const views = await Promise.all([...running, fresh].map(async (n) => parseClusterSlots(await n.command('CLUSTER', 'SLOTS'))));
      return views.every((ranges) => ranges.some((r) => r.start <= slot && slot <= r.end && r.master.port === fresh.port));
    });
    // The proxies learn the new master (MOVED, refresh) and give it an event link.
    let n = 0;
    await waitFor('events from the new master', async () => {
      n++;
      await writer.set(key('probe'), String(n)).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 100));
      return got.every((g) => g.includes(`__keyspace@0__:*|__keyspace@0__:${key('probe')}=set`));
    }, 20_000);
    await settled(got);
    const marks = got.map((g) => g.length);
    await writer.set(key('final'), 'v');
    await settled(got, marks.map((m) => m + 1));
    for (const [i, g] of got.entries()) expect(g.slice(marks[i])).toEqual([`__keyspace@0__:*|__keyspace@0__:${key('final')}=set`]);
  } finally {
    await fresh.destroy();
  }
}, 90_000);
