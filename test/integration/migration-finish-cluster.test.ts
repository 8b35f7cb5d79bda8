// The end of a migration between two Redis Clusters, in-process: a cluster-mode proxy in done takes
// a config whose cluster.seeds are side B's and that has no migration: (its keys then go to B's
// masters alone, A's slot map no longer followed); naming cluster A again is refused, on a reload
// and at a start while the proxy in done is registered on A's masters.
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { Config } from '../../config/schema';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { setLogLevel } from '../../proxy/telemetry/log';
import { keySlot } from '../../sharding/slot';

let a: RedisCluster | undefined;
let b: RedisCluster | undefined;
const proxies: ProxyServer[] = [];

beforeAll(async () => {
  setLogLevel('silent');
  [a, b] = await Promise.all([RedisCluster.start({ masters: 3, replicasPerMaster: 0 }), RedisCluster.start({ masters: 3, replicasPerMaster: 0 })]);
}, 90_000);

afterAll(async () => {
  await Promise.all(proxies.map((p) => p.close(200)));
  await Promise.all([a?.stop(), b?.stop()]);
}, 30_000);

function config(seeds: string[], migration?: Record<string, unknown>): Config {
  return parseConfig({ listen: '127.0.0.1:0', mode: 'cluster', cluster: { seeds }, crossSlot: 'split', ...(migration === undefined ? {} : { migration }), log: { level: 'silent' } });
}

test('cluster A -> cluster B: the finished config routes to B alone; cluster A again is refused on reload and at start', async () => {
  const seedsA = [a!.masters[0].address];
  const seedsB = [b!.masters[0].address];
  const p = await ProxyServer.start(config(seedsA, { phase: 'done', to: { cluster: { seeds: seedsB } } }));
  proxies.push(p);
  expect(() => p.reloadRing(config(seedsA))).toThrow(/^done is final: this config has no migration: and names side A \(cluster /);
  await expect(ProxyServer.start(config(seedsA))).rejects.toThrow(/^refused: these nodes are side A of a migration past done/);
  p.reloadRing(config(seedsB));
  const c = new Redis({ host: '127.0.0.1', port: p.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
  try {
    const keys = Array.from({ length: 30 }, (_, i) => `finish-cluster:${i}`);
    await c.mset(...keys.flatMap((k) => [k, k]));
    expect(await c.mget(...keys)).toEqual(keys);
    // Every key is on B's master of its slot, none on A.
    for (const k of keys) {
      expect(await (await b!.masterFor(keySlot(Buffer.from(k)))).command('GET', k)).toBe(k);
      expect(await (await a!.masterFor(keySlot(Buffer.from(k)))).command('EXISTS', k)).toBe(0);
    }
    expect(String(await c.info('proxy'))).toContain('proxy_mode:cluster');
  } finally {
    c.disconnect();
  }
  expect(() => p.reloadRing(config(seedsA))).toThrow(/^done is final/);
  expect(() => p.reloadRing(config(seedsB))).not.toThrow();
}, 60_000);
