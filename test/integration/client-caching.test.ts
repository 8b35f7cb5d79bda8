// Client-side caching through slotproxy in front of 3 masters, with real clients: node-redis's
// own cache (RESP3, clientSideCache) served from memory and dropped when a key changes, however it
// changes; REDIRECT's bookkeeping; the proxy's bounded key table; and the null invalidation
// whenever the proxy can no longer vouch for what a client holds (a lost feed, a failover).

import net from 'node:net';
import Redis from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { BasicClientSideCache, createClient } from 'redis';
import { startProxy, useProxy } from '../helpers/proxy';
import { keyPerMaster } from '../helpers/master-keys';
import { manualFailover } from '../helpers/cluster';
import { CachingReader } from '../helpers/caching-reader';
import { exchange } from '../helpers/raw-exchange';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { Ring } from '../../sharding/ring';
import { waitFor } from '../helpers/master-keys';

const { proxy, cluster, connect } = useProxy();
/**
 * An invalidation is pushed as the write happens (measured: a few ms). The bound says "pushed, not
 * polled or never", with room for a loaded machine's scheduling (a CI host running test files side
 * by side): a missing invalidation never resolves at all.
 */
const PROMPT_MS = 1000;
const port = (): number => proxy().address.port;
const opened: { close(): void }[] = [];
afterEach(() => {
  for (const c of opened.splice(0)) c.close();
});

/** A node-redis client with its client-side cache, and a way to await a key's invalidation. */
async function cachingClient(): Promise<{ get(key: string): Promise<string | null>; invalidated(key: string): Promise<number>; cache: BasicClientSideCache }> {
  const cache = new BasicClientSideCache({ ttl: 0, maxEntries: 0 });
  const client = createClient({ RESP: 3, clientSideCache: cache, socket: { host: '127.0.0.1', port: port(), reconnectStrategy: false } });
  client.on('error', () => undefined);
  await client.connect();
  opened.push({ close: () => client.destroy() });
  return {
    cache,
    get: (key) => client.get(key),
    /** Resolves with the ms from now until the cache drops `key` (or everything). */
    invalidated: (key) =>
      new Promise((resolve) => {
        const from = performance.now();
        const listener = (k: Buffer | null): void => {
          if (k !== null && k.toString() !== key) return;
          cache.off('invalidate', listener);
          resolve(performance.now() - from);
        };
        cache.on('invalidate', listener);
      }),
  };
}

beforeAll(async () => {
  // Active expiry every 10 ms instead of 100 ms, so an expired key is noticed promptly.
  for (const m of cluster().masters) await m.command('CONFIG', 'SET', 'hz', '100');
});

describe('node-redis clientSideCache (RESP3) through the proxy', () => {
  test('the second GET is served from the cache: no request reaches the proxy', async () => {
    const c = await cachingClient();
    await connect().set('csc:hit', 'v1');
    expect(await c.get('csc:hit')).toBe('v1');
    const before = proxy().stats.commands;
    expect(await c.get('csc:hit')).toBe('v1');
    expect(await c.get('csc:hit')).toBe('v1');
    expect(proxy().stats.commands).toBe(before);
    expect(c.cache.stats().hitCount).toBe(2);
  });

  test('a SET from another client of the proxy drops the cached value promptly', async () => {
    const c = await cachingClient();
    const writer = connect();
    for (const { key } of await keyPerMaster(cluster(), 'csc:set')) {
      await writer.set(key, 'old');
      expect(await c.get(key)).toBe('old');
      const dropped = c.invalidated(key);
      await writer.set(key, 'new');
      expect(await dropped).toBeLessThan(PROMPT_MS);
      expect(await c.get(key)).toBe('new');
    }
  });

  test("a SET from a client connected straight to the key's node drops it promptly", async () => {
    const c = await cachingClient();
    for (const { key, node } of await keyPerMaster(cluster(), 'csc:direct')) {
      await node.command('SET', key, 'old');
      expect(await c.get(key)).toBe('old');
      const dropped = c.invalidated(key);
      await node.command('SET', key, 'direct');
      expect(await dropped).toBeLessThan(PROMPT_MS);
      expect(await c.get(key)).toBe('direct');
    }
  });

  test('a SET through another slotproxy, and a script that writes, drop it promptly', async () => {
    const c = await cachingClient();
    let other: ProxyServer | undefined;
    try {
      other = await startProxy(cluster().seeds);
      const viaOther = new Redis({ host: '127.0.0.1', port: other.address.port, maxRetriesPerRequest: 0 });
      opened.push({ close: () => viaOther.disconnect() });
      await viaOther.set('csc:other', 'old');
      expect(await c.get('csc:other')).toBe('old');
      const dropped = c.invalidated('csc:other');
      await viaOther.set('csc:other', 'other-proxy');
      expect(await dropped).toBeLessThan(PROMPT_MS);
      expect(await c.get('csc:other')).toBe('other-proxy');
      const byScript = c.invalidated('csc:other');
      await connect().eval("return redis.call('SET', KEYS[1], 'script')", 1, 'csc:other');
      expect(await byScript).toBeLessThan(PROMPT_MS);
      expect(await c.get('csc:other')).toBe('script');
    } finally {
      await other?.close(100);
    }
  });

  test('an EXPIRE that runs out drops it promptly of the deadline', async () => {
    const c = await cachingClient();
    const writer = connect();
    await writer.set('csc:exp', 'soon', 'PX', 300);
    expect(await c.get('csc:exp')).toBe('soon');
    const deadline = performance.now() + (await writer.pttl('csc:exp'));
    const dropped = c.invalidated('csc:exp');
    await dropped;
    expect(performance.now() - deadline).toBeLessThan(PROMPT_MS);
    expect(await c.get('csc:exp')).toBeNull();
  });

  test('FLUSHALL drops everything promptly', async () => {
    const c = await cachingClient();
    const writer = connect();
    const keys = await keyPerMaster(cluster(), 'csc:flush');
    for (const { key } of keys) await writer.set(key, 'x');
    for (const { key } of keys) expect(await c.get(key)).toBe('x');
    expect(c.cache.size()).toBe(keys.length);
    const dropped = c.invalidated('anything');
    await writer.flushall();
    expect(await dropped).toBeLessThan(PROMPT_MS);
    expect(c.cache.size()).toBe(0);
  });
});

describe('REDIRECT', () => {
  test("GETREDIR and TRACKINGINFO name the target by its proxy CLIENT ID; a target that goes away is reported as Redis reports it", async () => {
    const target = net.connect(port(), '127.0.0.1');
    opened.push({ close: () => target.destroy() });
    const targetId = await new Promise<number>((resolve) => {
      target.once('data', (d: Buffer) => resolve(Number(d.toString().slice(1))));
      target.write('*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n');
    });
    const requests = [['CLIENT', 'TRACKING', 'ON', 'REDIRECT', String(targetId)], ['CLIENT', 'GETREDIR']];
    expect((await exchange(port(), requests)).replies).toBe(`+OK\r\n:${targetId}\r\n`);
    // A RESP3 client whose target is gone gets tracking-redir-broken instead of the invalidation.
    const socket = net.connect(port(), '127.0.0.1');
    opened.push({ close: () => socket.destroy() });
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    const send = (...args: string[]): void => void socket.write(`*${args.length}\r\n${args.map((a) => `$${a.length}\r\n${a}\r\n`).join('')}`);
    const until = (text: string): Promise<void> =>
      new Promise((resolve) => {
        const check = (): void => (got.includes(text) ? resolve() : void socket.once('data', check));
        check();
      });
    send('HELLO', '3');
    send('CLIENT', 'TRACKING', 'ON', 'REDIRECT', String(targetId));
    send('GET', 'redir:k');
    send('PING', 'ready');
    await until('ready');
    const closed = new Promise((resolve) => target.once('close', resolve));
    target.end();
    await closed;
    await connect().set('redir:k', '1');
    await until(`>2\r\n$21\r\ntracking-redir-broken\r\n:${targetId}\r\n`);
    got = '';
    send('CLIENT', 'TRACKINGINFO');
    await until('prefixes');
    expect(got).toContain(`~2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n:${targetId}\r\n`);
  });
});

describe('never stale', () => {
  test('a lost invalidation feed flushes every tracking client', async () => {
    const reader = await CachingReader.open(port());
    opened.push(reader);
    const [{ key, node }] = await keyPerMaster(cluster(), 'feed-lost');
    await reader.get(key);
    expect(reader.cache.size).toBe(1);
    const flushed = new Promise<void>((resolve) => reader.onInvalidate((k) => k === null && resolve()));
    // The proxy's feed is the node's BCAST tracking client (flags tB in CLIENT LIST); only it is killed.
    const feeds = String(await node.command('CLIENT', 'LIST')).split('\n').filter((l) => / flags=tB /.test(l));
    expect(feeds).toHaveLength(1);
    expect(await node.command('CLIENT', 'KILL', 'ID', feeds[0].split(' ')[0].slice(3))).toBe(1);
    await flushed;
    expect(reader.cache.size).toBe(0);
    // CLIENT TRACKING ON answers once the feeds are up; then values are cached and invalidated again.
    await reader.trackingOn();
    await reader.get(key);
    expect(reader.cache.size).toBe(1);
    const dropped = new Promise<void>((resolve) => reader.onInvalidate((k) => k === key && resolve()));
    await node.command('SET', key, 'after');
    await dropped;
    expect(await reader.get(key)).toBe('after');
  });

  test("a failover of a key's master flushes every tracking client", async () => {
    const reader = await CachingReader.open(port());
    opened.push(reader);
    const [{ key }] = await keyPerMaster(cluster(), 'failover');
    await connect().set(key, 'before');
    expect(await reader.get(key)).toBe('before');
    const flushed = new Promise<void>((resolve) => reader.onInvalidate((k) => k === null && resolve()));
    await manualFailover(cluster(), calculateSlot(key));
    // The proxy learns of it on its next request to the old master (MOVED) or its next refresh.
    await connect().set(key, 'after');
    await flushed;
    expect(await reader.get(key)).toBe('after');
  });

  test('past trackingTableMaxKeys the oldest keys are evicted and invalidated, and INFO counts them', async () => {
    let small: ProxyServer | undefined;
    try {
      small = await startProxy(cluster().seeds, { limits: { trackingTableMaxKeys: 3 } });
      const reader = await CachingReader.open(small.address.port);
      opened.push(reader);
      const evicted: (string | null)[] = [];
      reader.onInvalidate((k) => evicted.push(k));
      for (const k of ['cap:1', 'cap:2', 'cap:3', 'cap:4', 'cap:5']) await reader.get(k);
      // As on Redis, a read may take the table past the limit; any command evicts back down first.
      const info = (await exchange(small.address.port, [['INFO', 'proxy']])).replies;
      expect(info).toMatch(/\r\nproxy_tracking_clients:1\r\n/);
      expect(info).toMatch(/\r\nproxy_tracking_total_keys:3\r\n/);
      expect(info).toMatch(/\r\nproxy_tracking_evicted_keys:2\r\n/);
      await waitFor('both evictions told', async () => evicted.length === 2);
      expect(evicted).toEqual(['cap:1', 'cap:2']);
      expect([...reader.cache.keys()]).toEqual(['cap:3', 'cap:4', 'cap:5']);
    } finally {
      await small?.close(100);
    }
  });
});

describe('ring mode: a node ejected, then back', () => {
  let nodes: StandaloneNodes | undefined;
  let ringProxy: ProxyServer | undefined;
  const ringNodes = (): { name: string; addr: string; weight: number }[] => (nodes as StandaloneNodes).addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 }));
  beforeAll(async () => {
    nodes = await StandaloneNodes.start(3);
    const ring = { hash: 'md5', autoEjectHosts: true, serverFailureLimit: 1, serverRetryTimeoutMs: 1000, nodes: ringNodes() };
    ringProxy = await ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring, log: { level: 'silent' } }));
  }, 60_000);
  afterAll(async () => {
    await ringProxy?.close(100);
    await nodes?.stop();
  }, 30_000);

  test('a value read while its node was out of the ring is dropped when the node comes back', async () => {
    const proxyPort = (ringProxy as ProxyServer).address.port;
    const ring = new Ring({ hash: 'md5', hashTag: '{}', nodes: ringNodes() });
    let i = 0;
    while (ring.indexOf(Buffer.from(`eject:${i}`)) !== 2) i++;
    const key = `eject:${i}`;
    const writer = new Redis({ host: '127.0.0.1', port: proxyPort, maxRetriesPerRequest: 0 });
    writer.on('error', () => undefined);
    opened.push({ close: () => writer.disconnect() });
    const reader = await CachingReader.open(proxyPort);
    opened.push(reader);
    await writer.set(key, 'on-n2');
    await (nodes as StandaloneNodes).nodes[2].stop();
    // Failed requests eject the node; the key then lives on another node.
    await waitFor('the node ejected', async () => (await writer.set(key, 'elsewhere').then(() => true, () => false)));
    while (!reader.cache.has(key)) await reader.get(key);
    expect(reader.cache.get(key)).toBe('elsewhere');
    await (nodes as StandaloneNodes).nodes[2].restart();
    await waitFor('the node back in the ring', async () => (await writer.get(key).catch(() => 'elsewhere')) !== 'elsewhere');
    expect(await reader.get(key)).toBe(await writer.get(key));
  }, 30_000);
});
