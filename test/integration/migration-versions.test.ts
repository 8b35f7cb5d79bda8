// Migrations across Redis versions: keys move by DUMP and RESTORE, and a node refuses the payload of
// a newer version, so a side A newer than side B is refused before double-write starts, naming both
// versions; a B of the same version or newer migrates, into a ring and into a cluster. Real
// redis-servers of the OS's build (Debian's 7.0) and the shared Redis 7.4.1 and Valkey 8.0.1 builds.
import path from 'node:path';
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { freePort } from '../../cmd/sandbox/ports';
import { findExecutable } from '../../cmd/sandbox/executables';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { eventually } from '../helpers/eventually';

/** The shared 7.4.1 build, where .ci/run looks for it ($SLOTPROXY_CI_SHARED, else ../shared beside the repository). */
const SHARED = process.env.SLOTPROXY_CI_SHARED ?? path.resolve(__dirname, '..', '..', '..', 'shared');
const NEWER = findExecutable(path.join(SHARED, 'redis', '7.4.1', 'redis-server'));
const OLDER = findExecutable('redis-server');
/** Every shared build newer than the OS's that is on this machine: a side B for a 7.0 side A. */
const NEWER_BUILDS = [
  ['Redis 7.4.1', NEWER],
  ['Valkey 8.0.1', findExecutable(path.join(SHARED, 'valkey', '8.0.1', 'valkey-server'))],
].filter((b): b is [string, string] => b[1] !== null);

const nodes: RedisNode[] = [];
const proxies: ProxyServer[] = [];
const clients: Redis[] = [];
const clusters: RedisCluster[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await Promise.all(proxies.splice(0).map((p) => p.close(200)));
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
  await Promise.all(clusters.splice(0).map((c) => c.stop()));
}, 30_000);

async function startNodes(bin: string, n: number): Promise<RedisNode[]> {
  const started = await Promise.all(Array.from({ length: n }, async () => RedisNode.start({ port: await freePort(), serverBin: bin })));
  nodes.push(...started);
  return started;
}

/** Ring A over `a`, migrating in double-write into ring B over `b`. */
function config(a: RedisNode[], b: RedisNode[]): Record<string, unknown> {
  const ring = (ns: RedisNode[], prefix: string): { name: string; addr: string }[] => ns.map((n, i) => ({ name: `${prefix}${i}`, addr: n.address }));
  return {
    listen: '127.0.0.1:0',
    mode: 'ring',
    ring: { hash: 'md5', nodes: ring(a, 'a') },
    migration: { phase: 'double-write', to: { nodes: ring(b, 'b') } },
    log: { level: 'silent' },
  };
}

test('the same version on both sides passes the check: the proxy starts in double-write and copies what is written', async () => {
  const bin = OLDER ?? 'redis-server';
  const a = await startNodes(bin, 1);
  const b = await startNodes(bin, 1);
  const proxy = await ProxyServer.start(parseConfig(config(a, b)));
  proxies.push(proxy);
  const c = new Redis({ port: proxy.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(c);
  expect(await c.set('same:k', 'v')).toBe('OK');
  await eventually(() => b[0].command('GET', 'same:k'), (v) => v === 'v', 30_000);
}, 60_000);

// Needs two builds of different versions: the shared 7.4.1 one is not on every machine (CI's may
// lack ../shared), and the OS's must be older than it.
if (NEWER !== null && OLDER !== null) {
  test('a side A newer than side B (7.4.1 into 7.0) is refused before double-write, naming both versions', async () => {
    const a = await startNodes(NEWER, 2);
    const b = await startNodes(OLDER, 2);
    const older = String(await b[0].command('INFO', 'server')).match(/redis_version:([^\r\n]+)/)?.[1] ?? '';
    const refusal = await ProxyServer.start(parseConfig(config(a, b))).then(
      (p) => {
        proxies.push(p);
        return 'started';
      },
      (err: Error) => err.message,
    );
    expect(refusal).toMatch(
      new RegExp(
        `^migration\\.phase double-write refused: side A's node 127\\.0\\.0\\.1:(${a.map((n) => n.port).join('|')}) runs Redis 7\\.4\\.1, ` +
          `newer than side B's node 127\\.0\\.0\\.1:(${b.map((n) => n.port).join('|')}) \\(Redis ${older.replace(/\./g, '\\.')}\\): keys move by DUMP and RESTORE`,
      ),
    );
  });

}

// Needs a shared build newer than the OS's (absent where ../shared is not beside the repository).
if (OLDER !== null && NEWER_BUILDS.length > 0) {
  test.each(NEWER_BUILDS)('a side B newer than side A (7.0 into %s) migrates: what is written through the proxy reaches B', async (_name, newer) => {
    const a = await startNodes(OLDER, 2);
    const b = await startNodes(newer, 2);
    const proxy = await ProxyServer.start(parseConfig(config(a, b)));
    proxies.push(proxy);
    const c = new Redis({ port: proxy.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
    clients.push(c);
    const keys = Array.from({ length: 20 }, (_, i) => `during:${i}`);
    for (const k of keys) expect(await c.set(k, `w-${k}`)).toBe('OK');
    // Every key written during double-write is copied to B (DUMP on 7.0, RESTORE on 7.4.1), on one node of B.
    const onB = async (k: string): Promise<string[]> => (await Promise.all(b.map((n) => n.command('GET', k)))).filter((v) => v !== null).map(String);
    const copied = async (): Promise<number> => (await Promise.all(keys.map(onB))).filter((vs) => vs.length === 1).length;
    await eventually(copied, (n) => n === keys.length, 30_000);
    for (const k of keys) expect(await onB(k)).toEqual([`w-${k}`]);
  }, 60_000);

  test.each(NEWER_BUILDS)('a ring of 7.0 into a cluster of %s: keys written before, by the full sync, and during double-write, by the stream, are on B', async (_name, newer) => {
    const a = await startNodes(OLDER, 2);
    const b = await RedisCluster.start({ masters: 2, replicasPerMaster: 0, serverBin: newer });
    clusters.push(b);
    // Written before the migration, through a proxy of ring A alone: strings with a TTL, hashes, lists, sorted sets.
    const { migration: _none, ...ringOnly } = config(a, []);
    const before = await ProxyServer.start(parseConfig(ringOnly));
    const w = new Redis({ port: before.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
    try {
      for (let i = 0; i < 100; i++) {
        await w.set(`before:${i}`, `s${i}`, 'EX', 3600);
        await w.hset(`h:${i}`, 'f', i);
        await w.rpush(`l:${i}`, 'x', 'y');
        await w.zadd(`z:${i}`, i, 'm');
      }
    } finally {
      w.disconnect();
      await before.close(200);
    }
    const proxy = await ProxyServer.start(parseConfig({ ...config(a, []), migration: { phase: 'double-write', to: { cluster: { seeds: [b.masters[0].address] } } } }));
    proxies.push(proxy);
    const c = new Redis({ port: proxy.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
    clients.push(c);
    for (let i = 0; i < 50; i++) expect(await c.incr(`during:${i % 7}`)).toBeGreaterThan(0);
    // The reference: what A holds, read through the proxy (double-write reads A).
    const keys = (await Promise.all(a.map((n) => n.command('KEYS', '*')))).flat().map(String).filter((k) => !k.startsWith('__slotproxy'));
    expect(keys.length).toBe(4 * 100 + 7);
    /** The key's type on the master of B that holds it, and whether it has a TTL there. */
    const dumpOn = async (k: string): Promise<string> => {
      // The masters that do not serve the key's slot answer MOVED.
      const held = await Promise.all(b.masters.map((m) => Promise.all([m.command('TYPE', k), m.command('PEXPIRETIME', k)]).then(([type, at]) => JSON.stringify([type, at !== -1]), () => 'moved')));
      return held.find((v) => v !== 'moved' && !v.startsWith('["none"')) ?? 'missing';
    };
    // Every key on the cluster with its type and TTL; the counters with their value.
    await eventually(async () => (await Promise.all(keys.map(dumpOn))).filter((v) => v === 'missing').length, (n) => n === 0, 30_000);
    for (const k of keys.filter((k) => k.startsWith('before:'))) expect(await dumpOn(k)).toBe('["string",true]');
    for (const k of keys.filter((k) => k.startsWith('h:'))) expect(await dumpOn(k)).toBe('["hash",false]');
    const view = new Redis.Cluster([{ host: '127.0.0.1', port: b.masters[0].port }], { redisOptions: { disableClientInfo: true } });
    try {
      await eventually(async () => (await Promise.all(Array.from({ length: 7 }, (_, i) => view.get(`during:${i}`)))).join(','), (v) => v === [8, 7, 7, 7, 7, 7, 7].join(','), 30_000);
      expect(await view.lrange(keys.find((k) => k.startsWith('l:')) as string, 0, -1)).toEqual(['x', 'y']);
    } finally {
      view.disconnect();
    }
  }, 90_000);
}
