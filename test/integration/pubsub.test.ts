// Pub/Sub through the proxy (SPEC section 5): SUBSCRIBE/PSUBSCRIBE and PUBLISH from any path,
// subscribed-mode replies and errors as Redis gives them, SSUBSCRIBE/SPUBLISH by slot, and a
// subscriber that survives a failover of the node it listens on.

import net from 'node:net';
import { useProxy } from '../helpers/proxy';
import { keyPerMaster, waitFor } from '../helpers/master-keys';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { collect } from '../helpers/subscriber';

const { cluster, proxy, connect } = useProxy();

function resp(...args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

/** A raw client: write RESP, read until the text received so far satisfies `until`. */
class RawClient {
  private readonly socket: net.Socket;
  text = '';

  constructor(port: number) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.on('data', (d) => (this.text += d.toString()));
  }

  async send(payload: string, until: (text: string) => boolean): Promise<string> {
    this.text = '';
    this.socket.write(payload);
    await waitFor(`a reply to ${JSON.stringify(payload)}`, async () => until(this.text), 5000);
    return this.text;
  }

  close(): void {
    this.socket.destroy();
  }
}

test('PUBLISH through the proxy and directly on every master reaches SUBSCRIBE and PSUBSCRIBE clients', async () => {
  const sub = connect();
  const got = collect(sub);
  expect(await sub.subscribe('news', 'sport')).toBe(2);
  expect(await sub.psubscribe('weather.*')).toBe(3);
  const pub = connect();
  await pub.publish('news', 'via-proxy');
  await pub.publish('weather.rain', 'p1');
  for (const m of cluster().masters) await m.command('PUBLISH', 'sport', `direct-${m.port}`);
  const expected = ['news=via-proxy', 'weather.*|weather.rain=p1', ...cluster().masters.map((m) => `sport=direct-${m.port}`)];
  await waitFor('every message', async () => expected.every((e) => got.includes(e)));
  expect(got.sort()).toEqual(expected.sort());
});

test('PUBSUB CHANNELS, NUMSUB and NUMPAT count every subscriber of the proxy, from any client, as one Redis would', async () => {
  const asker = connect();
  // Patterns other tests of this file still hold count too, as on one Redis.
  const patternsBefore = Number(await asker.call('PUBSUB', 'NUMPAT'));
  const sub = connect();
  const psub = connect();
  await sub.subscribe('census-a', 'census-b');
  await psub.psubscribe('census-*');
  expect(((await asker.call('PUBSUB', 'CHANNELS', 'census-*')) as string[]).sort()).toEqual(['census-a', 'census-b']);
  expect(await asker.call('PUBSUB', 'NUMSUB', 'census-a', 'census-c')).toEqual(['census-a', 1, 'census-c', 0]);
  expect(await asker.call('PUBSUB', 'NUMPAT')).toBe(patternsBefore + 1);
  await sub.unsubscribe();
  await psub.punsubscribe();
});

test('subscribed mode: PING, Redis\'s error for other commands, UNSUBSCRIBE counts, then back to normal', async () => {
  const c = new RawClient(proxy().address.port);
  try {
    expect(await c.send(resp('SUBSCRIBE', 'a', 'b'), (t) => t.includes(':2\r\n'))).toBe(
      '*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n',
    );
    expect(await c.send(resp('GET', 'x') + resp('PING') + resp('PING', 'hi'), (t) => t.includes('hi\r\n'))).toBe(
      "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n" +
        '*2\r\n$4\r\npong\r\n$0\r\n\r\n*2\r\n$4\r\npong\r\n$2\r\nhi\r\n',
    );
    const unsub = await c.send(resp('UNSUBSCRIBE'), (t) => t.includes(':0\r\n'));
    expect(unsub.split('\r\n').filter((l) => l.startsWith(':'))).toEqual([':1', ':0']);
    expect(await c.send(resp('SET', 'after-sub', 'v') + resp('GET', 'after-sub'), (t) => t.includes('$1\r\nv'))).toBe('+OK\r\n$1\r\nv\r\n');
    expect(await c.send(resp('UNSUBSCRIBE'), (t) => t.endsWith(':0\r\n'))).toBe('*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n');
  } finally {
    c.close();
  }
});

test('subscribed mode ends in request order: after the last UNSUBSCRIBE or RESET, commands run and no message follows', async () => {
  const c = new RawClient(proxy().address.port);
  const pub = connect();
  let publishing = true;
  const flood = (async (): Promise<void> => {
    while (publishing) await pub.publish('flood', 'm');
  })();
  const message = '*3\r\n$7\r\nmessage\r\n$5\r\nflood\r\n$1\r\nm\r\n';
  try {
    for (const [end, confirmation] of [
      [resp('UNSUBSCRIBE', 'flood'), '*3\r\n$11\r\nunsubscribe\r\n$5\r\nflood\r\n:0\r\n'],
      [resp('RESET'), '+RESET\r\n'],
    ]) {
      // Subscribed, and messages flowing, when the pipeline that ends it is sent.
      await c.send(resp('SUBSCRIBE', 'flood'), (t) => t.includes(message));
      const text = await c.send(end + resp('SET', 'after-flood', 'v') + resp('GET', 'after-flood'), (t) => t.endsWith('+OK\r\n$1\r\nv\r\n'));
      const at = text.indexOf(confirmation);
      expect(at).toBeGreaterThanOrEqual(0);
      // Before the confirmation only messages; after it the two replies and nothing else, even later.
      expect(text.slice(0, at).split(message).join('')).toBe('');
      expect(text.slice(at + confirmation.length)).toBe('+OK\r\n$1\r\nv\r\n');
      await new Promise((r) => setTimeout(r, 200));
      expect(c.text).toBe(text);
    }
  } finally {
    publishing = false;
    await flood;
    c.close();
  }
});

test('SSUBSCRIBE listens on the channel\'s slot owner; SPUBLISH routes by slot; CROSSSLOT across slots', async () => {
  const channels = await keyPerMaster(cluster(), 'shardch');
  const sub = connect();
  const got = collect(sub);
  for (const { key, node } of channels) {
    await sub.ssubscribe(key);
    const list = (await node.command('CLIENT', 'LIST')) as string;
    expect(list).toContain('cmd=ssubscribe');
  }
  const pub = connect();
  for (const { key } of channels) expect(await pub.spublish(key, `m-${key}`)).toBe(1);
  const expected = channels.map(({ key }) => `s:${key}=m-${key}`);
  await waitFor('every shard message', async () => expected.every((e) => got.includes(e)));
  const other = connect();
  await expect(other.ssubscribe(channels[0].key, channels[1].key)).rejects.toThrow("CROSSSLOT Keys in request don't hash to the same slot");
});

test('a subscriber is not lost when the node it listens on fails over', async () => {
  const [{ key: shardChannel, node: master }] = await keyPerMaster(cluster(), 'fo-ch');
  const sub = connect();
  const got = collect(sub);
  await sub.subscribe('fo-news');
  await sub.ssubscribe(shardChannel);
  const [replica] = await cluster().replicasOf(master);
  expect(await replica.cli('CLUSTER', 'FAILOVER')).toBe('OK');
  await cluster().waitForClusterOk();
  const pub = connect();
  let n = 0;
  // Pub/Sub is at-most-once: publish until one message of each kind arrives after the failover.
  await waitFor('messages after the failover', async () => {
    n++;
    await pub.publish('fo-news', `n${n}`);
    await pub.call('SPUBLISH', shardChannel, `s${n}`).catch(() => 0);
    return got.some((g) => g.startsWith('fo-news=')) && got.some((g) => g.startsWith(`s:${shardChannel}=`));
  }, 20_000);
  const list = (await replica.command('CLIENT', 'LIST')) as string;
  expect(list).toContain('cmd=ssubscribe');
}, 60_000);

test('a subscriber that does not read is closed past 32 MiB, as Redis does; one that reads gets everything', async () => {
  const slow = net.connect(proxy().address.port, '127.0.0.1');
  let closed = false;
  slow.on('close', () => (closed = true));
  slow.on('error', () => undefined);
  let confirmed = '';
  slow.on('data', (d) => (confirmed += d.toString('latin1')));
  slow.write(resp('SUBSCRIBE', 'firehose'));
  await waitFor('the slow subscriber to subscribe', async () => confirmed.includes(':1\r\n'));
  slow.removeAllListeners('data');
  slow.pause();
  const fast = connect();
  let received = 0;
  fast.on('message', () => received++);
  await fast.subscribe('firehose');
  const pub = connect();
  const payload = 'x'.repeat(64 * 1024);
  const MESSAGES = 800; // 50 MiB
  for (let i = 0; i < MESSAGES; i += 50) {
    await Promise.all(Array.from({ length: 50 }, () => pub.publish('firehose', payload)));
  }
  // Reading again, the slow subscriber finds its connection closed by the proxy, its stream cut short.
  let slowBytes = 0;
  slow.on('data', (d: Buffer) => (slowBytes += d.length));
  slow.resume();
  await waitFor('the slow subscriber to be closed', async () => closed, 20_000);
  expect(slowBytes).toBeLessThan(MESSAGES * payload.length);
  await waitFor('the reading subscriber to get every message', async () => received === MESSAGES, 20_000);
  slow.destroy();
}, 60_000);

test('kill -9 of the master a subscriber listens on: it subscribes again elsewhere and keeps receiving', async () => {
  const sub = connect();
  const got = collect(sub);
  await sub.subscribe('kill-news');
  await sub.psubscribe('kill.*');
  // The master holding this client's SUBSCRIBE link (the only client with exactly these subscriptions).
  const mine = async (m: RedisNode): Promise<boolean> => ((await m.command('CLIENT', 'LIST')) as string).includes('sub=1 psub=1 ssub=0');
  const homes: RedisNode[] = [];
  for (const m of cluster().masters) if (await mine(m)) homes.push(m);
  expect(homes).toHaveLength(1);
  const home = homes[0];
  // Connected before the kill: ioredis's ready check (INFO, a fan-out) fails while a master is down.
  const pub = connect();
  await pub.ping();
  home.kill('SIGKILL');
  await home.waitForExit();
  let n = 0;
  await waitFor('messages after the kill', async () => {
    n++;
    await pub.publish('kill-news', `k${n}`).catch(() => 0);
    await pub.publish('kill.x', `p${n}`).catch(() => 0);
    return got.some((g) => g.startsWith('kill-news=')) && got.some((g) => g.startsWith('kill.*|kill.x='));
  }, 30_000);
  const relinked: RedisNode[] = [];
  for (const m of cluster().nodes.filter((x) => x.running)) if (await mine(m)) relinked.push(m);
  expect(relinked).toHaveLength(1);
  expect(relinked[0]).not.toBe(home);
  // Still one subscriber, not a duplicate per re-subscription.
  const before = got.length;
  // PUBLISH may still be sent to the dead master until the proxy's topology has caught up.
  await waitFor('one PUBLISH to go through', async () => (await pub.publish('kill-news', 'once').then(() => true, () => false)));
  await waitFor('the last message', async () => got.includes('kill-news=once'));
  expect(got.slice(before).filter((g) => g === 'kill-news=once')).toHaveLength(1);
}, 60_000);
