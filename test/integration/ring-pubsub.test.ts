// Issue 12 in ring mode: standalone nodes have no cluster bus, so slotproxy puts SUBSCRIBE/PSUBSCRIBE
// and PUBLISH on one home node (the ring's first) and keyspace-capable subscriptions on every node.
// Two proxies in front of one ring must give the PUBLISH counts, messages and keyspace events of one
// standalone Redis; a node that restarts is subscribed again.

import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { Ring } from '../../sharding/ring';
import { client } from '../helpers/proxy';
import { waitFor } from '../helpers/master-keys';
import { closedAfterEach, collect, settled } from '../helpers/subscriber';
import { Side, expectOneRedis } from '../helpers/pubsub-scenario';

const KEYSPACE_EVENTS = ['--notify-keyspace-events', 'KEA'];
let nodes: StandaloneNodes | undefined;
let reference: StandaloneNodes | undefined;
const proxies: ProxyServer[] = [];
const track = closedAfterEach();
let ring: Ring;

beforeAll(async () => {
  nodes = await StandaloneNodes.start(3, { extraArgs: KEYSPACE_EVENTS });
  reference = await StandaloneNodes.start(1, { extraArgs: KEYSPACE_EVENTS });
  const ringNodes = nodes.addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 }));
  ring = new Ring({ hash: 'md5', hashTag: '{}', nodes: ringNodes });
  for (let i = 0; i < 2; i++) {
    proxies.push(await ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring: { hash: 'md5', nodes: ringNodes }, log: { level: 'silent' } })));
  }
}, 60_000);

afterAll(async () => {
  for (const p of proxies) await p.close(200);
  await nodes?.stop();
  await reference?.stop();
}, 30_000);

const twoProxies: Side = { connect: (i) => track(client(proxies[i % 2], { disableClientInfo: true })) };

/** A key per ring node, in node order. */
function keyPerNode(prefix: string): string[] {
  return nodes!.nodes.map((_, idx) => {
    for (let i = 0; ; i++) if (ring.indexOf(Buffer.from(`${prefix}:${i}`)) === idx) return `${prefix}:${i}`;
  });
}

test('counts, messages and keyspace events through two ring proxies are those of one Redis', async () => {
  const oneRedis: Side = { connect: () => track(new Redis({ host: '127.0.0.1', port: reference!.nodes[0].port, maxRetriesPerRequest: 0 })) };
  await expectOneRedis(oneRedis, twoProxies, keyPerNode('ks'));
}, 60_000);

test('a ring node that restarts is subscribed again; its events come once', async () => {
  const sub = twoProxies.connect(1);
  const got = [collect(sub)];
  await sub.psubscribe('__keyspace@0__:*');
  const writer = twoProxies.connect(0);
  const down = nodes!.nodes[2];
  const key = keyPerNode('restart')[2];
  await down.restart();
  await waitFor('events from the restarted node', async () => {
    const before = got[0].length;
    await writer.set(key, 'v').catch(() => undefined);
    await new Promise((r) => setTimeout(r, 100));
    return got[0].slice(before).includes(`__keyspace@0__:*|__keyspace@0__:${key}=set`);
  }, 20_000);
  await settled(got);
  const mark = got[0].length;
  expect(await writer.publish('plain', 'x')).toBe(0);
  await writer.set(key, 'w');
  await settled(got, [mark + 1]);
  expect(got[0].slice(mark)).toEqual([`__keyspace@0__:*|__keyspace@0__:${key}=set`]);
}, 60_000);
