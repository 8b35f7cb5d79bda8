// Issue 12, faults: `kill -9` of the Pub/Sub home (the master serving slot 0) with subscribers on two
// proxies. The cluster promotes its replica, both proxies move their home links and their PUBLISHes
// there, and the other masters' event links stay: PUBLISH counts every subscriber again and every
// master's keyspace events arrive, each once. The measured windows are printed for the report.

import Redis from 'ioredis';
import { ProxyServer } from '../../../proxy/server/server';
import { client, startProxy, useProxy } from '../../helpers/proxy';
import { keyPerMaster, waitFor } from '../../helpers/master-keys';
import { closedAfterEach, collect, settled } from '../../helpers/subscriber';

const NODE_TIMEOUT_MS = 1000;
const PROXY_CONFIG = { cluster: { refreshIntervalMs: 500 } };
const env = useProxy(PROXY_CONFIG, { masters: 3, replicasPerMaster: 1, nodeTimeoutMs: NODE_TIMEOUT_MS });
let second: ProxyServer | undefined;
const track = closedAfterEach();

beforeAll(async () => {
  second = await startProxy(env.cluster().seeds, PROXY_CONFIG);
  for (const node of env.cluster().nodes) await node.command('CONFIG', 'SET', 'notify-keyspace-events', 'KEA');
}, 30_000);

afterAll(async () => {
  await second?.close(500);
}, 30_000);

/** A client of proxy A (even) or B (odd), connected now: ioredis's ready check fans out, which fails while a master is down. */
function connect(i: number): Redis {
  return track(client(i % 2 === 0 ? env.proxy() : second!, { retryStrategy: () => null }));
}

test('kill -9 of the home master: counts and every master\'s keyspace events come back, each once', async () => {
  const cluster = env.cluster();
  const [news, all, events] = [connect(0), connect(1), connect(0)];
  const got = [collect(news), collect(all), collect(events)];
  await news.subscribe('news');
  await all.psubscribe('*');
  await events.psubscribe('__keyevent@0__:*');
  const [pubA, pubB, writer] = [connect(0), connect(1), connect(1)];
  await writer.ping();
  expect([await pubA.publish('news', 'before'), await pubB.publish('news', 'before')]).toEqual([2, 2]);

  const home = await cluster.masterFor(0);
  const [heir] = await cluster.replicasOf(home);
  const killedAt = Date.now();
  home.kill('SIGKILL');
  await home.waitForExit();
  let counts: number[] = [];
  await waitFor('PUBLISH through both proxies to count both subscribers', async () => {
    counts = [await pubA.publish('news', 'probe').catch(() => -1), await pubB.publish('news', 'probe').catch(() => -1)];
    return counts[0] === 2 && counts[1] === 2;
  }, 30_000).catch(() => expect(counts).toEqual([2, 2]));
  const countsAt = Date.now();
  await cluster.waitForClusterOk(20_000);
  expect(await cluster.masterFor(0)).toBe(heir);
  const probes = (await keyPerMaster(cluster, 'kill-probe')).map((k) => k.key);
  await waitFor('keyspace events from every master', async () => {
    const before = got[2].length;
    for (const k of probes) await writer.set(k, 'p').catch(() => undefined);
    await new Promise((r) => setTimeout(r, 100));
    return probes.every((k) => got[2].slice(before).includes(`__keyevent@0__:*|__keyevent@0__:set=${k}`));
  }, 20_000);
  process.stdout.write(
    `kill -9 of the Pub/Sub home (node timeout ${NODE_TIMEOUT_MS} ms): PUBLISH counted every subscriber again ` +
      `${countsAt - killedAt} ms after the kill; every master's events came ${Date.now() - killedAt} ms after it\n`,
  );

  // From here on, exactly once each.
  await settled(got);
  const marks = got.map((g) => g.length);
  const keys = (await keyPerMaster(cluster, 'kill-after')).map((k) => k.key);
  expect([await pubA.publish('news', 'after'), await pubB.publish('other', 'only-all')]).toEqual([2, 1]);
  for (const k of keys) await writer.set(k, 'x');
  await settled(got, [marks[0] + 1, marks[1] + 2 + 2 * keys.length, marks[2] + keys.length]);
  expect(got[0].slice(marks[0])).toEqual(['news=after']);
  expect(got[1].slice(marks[1]).sort()).toEqual(
    ['*|news=after', '*|other=only-all', ...keys.flatMap((k) => [`*|__keyevent@0__:set=${k}`, `*|__keyspace@0__:${k}=set`])].sort(),
  );
  expect(got[2].slice(marks[2]).sort()).toEqual(keys.map((k) => `__keyevent@0__:*|__keyevent@0__:set=${k}`).sort());
}, 90_000);
